"""The client: any process that uses a cluster."""
