"""rl tests run with one torch thread, as training runs do (``rl.use_torch_threads``); importing
``rl`` itself leaves torch's settings alone."""

import rl

rl.use_torch_threads(1)
