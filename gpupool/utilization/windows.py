"""The windows of GPU use against allocation, by name: one set, and one default, for the
Utilisation page (``?window=``), the API (``/api/v1/utilization/...?window=``) and the command
line (``manage.py gpupool utilization --window``). Each is that long before the window's end
(the pool's clock unless asked otherwise); the API also takes ``?since=&until=`` and the
command line ``--since DURATION`` for any other length, up to ``MAX_WINDOW``.
"""

from __future__ import annotations

from datetime import timedelta

# The last hours or days, by name, shortest first.
WINDOWS = {
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
}
# Asked for none: the page's day, so the API's rows and the page's table agree.
DEFAULT_WINDOW = "24h"
# The longest a window may be, by name or by since and until.
MAX_WINDOW = timedelta(days=92)


def not_a_window(name: str) -> str:
    """What is wrong with ``name`` as a window: the message that names the windows."""
    return f"{name!r} is not a window: one of {', '.join(WINDOWS)}"


def window_length(name: str) -> timedelta:
    """The length of the window called ``name``; a ValueError (``not_a_window``) else."""
    try:
        return WINDOWS[name]
    except KeyError:
        raise ValueError(not_a_window(name)) from None
