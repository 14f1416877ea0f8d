"""Run-time switches read from the environment in one place.

``SKYJOIN_NUMBA_CACHE``: "0" disables Numba's on-disk cache of compiled
functions (default on, so that a second process skips compilation).
"""

import os

NUMBA_CACHE = os.environ.get("SKYJOIN_NUMBA_CACHE", "1") not in ("0", "false", "no", "")
