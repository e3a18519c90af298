"""How often a streaming reply repeats its typing indicator, per platform.

A platform shows ``typing`` for a fixed time after each request (Telegram about 5 s,
Discord about 10 s) and then drops it; repeating it a little before it lapses keeps it
on screen without a gap. A connector may state the lifetime in its descriptor
(``typing_lifetime_s``, optional); otherwise the table below, else the shortest common
lifetime, 5 s.

Sans-I/O: no Trio, no sockets.
"""

from __future__ import annotations

from .descriptor import Descriptor
from .event import normalize_platform

__all__ = ["DEFAULT_TYPING_LIFETIME", "TYPING_LIFETIMES", "typing_interval"]

DEFAULT_TYPING_LIFETIME = 5.0
TYPING_LIFETIMES: dict[str, float] = {
    "telegram": 5.0,
    "discord": 10.0,
    "whatsapp": 25.0,
    "signal": 15.0,
}
_MARGIN = 0.8  # repeat at 80% of the lifetime: one slow round trip must not open a gap


def typing_interval(descriptor: Descriptor | None) -> float:
    """Seconds between two ``typing`` requests for ``descriptor``'s platform."""
    lifetime = DEFAULT_TYPING_LIFETIME
    if descriptor is not None:
        stated = descriptor.raw.get("typing_lifetime_s")
        if isinstance(stated, (int, float)) and not isinstance(stated, bool) and stated > 0:
            lifetime = float(stated)
        else:
            lifetime = TYPING_LIFETIMES.get(
                normalize_platform(descriptor.platform), DEFAULT_TYPING_LIFETIME
            )
    return lifetime * _MARGIN
