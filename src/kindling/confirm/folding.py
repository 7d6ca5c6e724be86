"""One fold for action names, shared by every rule that compares them (rate limits, the high-risk set).

Two spellings an approver would read as the same action must fold to the same key: case, runs of
spaces, '-', '.' and '_', Unicode compatibility forms (full-width letters, ligatures), letters from
other scripts that look Latin (``LOOKALIKES``: Cyrillic ``е``, Greek ``ο``) and invisible format
characters all fold away. A leaf module so the store and the policy rules use the same function.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_SEPARATORS_RE = re.compile(r"[\s._\-]+")

# Letters from other scripts that render like a Latin letter or digit in common fonts. Built from
# the Unicode character names (facts), kept short: the scripts an attacker reaches for first.
LOOKALIKES: dict[str, str] = {
    # Cyrillic small
    "\u0430": "a",
    "\u0432": "b",
    "\u0435": "e",
    "\u043e": "o",
    "\u0440": "p",
    "\u0441": "c",
    "\u0443": "y",
    "\u0445": "x",
    "\u0455": "s",
    "\u0456": "i",
    "\u0458": "j",
    "\u0501": "d",
    "\u051b": "q",
    "\u051d": "w",
    "\u04bb": "h",
    "\u04cf": "l",
    "\u0457": "i",
    "\u0433": "r",
    "\u043a": "k",
    "\u043c": "m",
    "\u043d": "h",
    "\u0442": "t",
    "\u0448": "w",
    "\u0460": "w",
    # Cyrillic capital
    "\u0410": "a",
    "\u0412": "b",
    "\u0415": "e",
    "\u041a": "k",
    "\u041c": "m",
    "\u041d": "h",
    "\u041e": "o",
    "\u0420": "p",
    "\u0421": "c",
    "\u0422": "t",
    "\u0425": "x",
    "\u0423": "y",
    "\u0406": "i",
    "\u0408": "j",
    "\u0405": "s",
    "\u051a": "q",
    "\u051c": "w",
    "\u04c0": "l",
    # Greek
    "\u03b1": "a",
    "\u03bf": "o",
    "\u03bd": "v",
    "\u03c1": "p",
    "\u03b9": "i",
    "\u03ba": "k",
    "\u03c5": "u",
    "\u03c7": "x",
    "\u03b5": "e",
    "\u03c4": "t",
    "\u03c9": "w",
    "\u0391": "a",
    "\u0392": "b",
    "\u0395": "e",
    "\u0396": "z",
    "\u0397": "h",
    "\u0399": "i",
    "\u039a": "k",
    "\u039c": "m",
    "\u039d": "n",
    "\u039f": "o",
    "\u03a1": "p",
    "\u03a4": "t",
    "\u03a5": "y",
    "\u03a7": "x",
    # Armenian
    "\u0585": "o",
    "\u057d": "u",
    "\u0581": "g",
    "\u0570": "h",
    "\u0578": "n",
    "\u057c": "n",
    # Latin letters that pass for other Latin letters
    "\u0131": "i",
    "\u0251": "a",
    "\u0261": "g",
    "\u2113": "l",
    "\u01c0": "l",
    "\u0269": "i",
    "\u1d00": "a",
    "\u0299": "b",
    "\u1d04": "c",
    "\u1d05": "d",
    "\u1d07": "e",
    # Dashes that pass for '-'
    "\u2010": "-",
    "\u2011": "-",
    "\u2012": "-",
    "\u2013": "-",
    "\u2014": "-",
    "\u2212": "-",
    "\ufe63": "-",
    "\u2043": "-",
}


# Agents submit the same few actions over and over: each is folded once (actions are at most 200
# characters, so the cache stays small).
@lru_cache(maxsize=4096)
def fold_action(action: str) -> str:
    """Return ``action`` folded for comparison: NFKC, case-folded, separator runs as one '_'.

    ``Deploy-Production``, ``DEPLOY_PRODUCTION``, full-width ``ｄｅｐｌｏｙ＿ｐｒｏｄｕｃｔｉｏｎ`` and
    ``dеploy_production`` (Cyrillic ``е``) all fold to ``deploy_production``.
    """
    text = unicodedata.normalize("NFKC", action).casefold()
    text = "".join(LOOKALIKES.get(ch, ch) for ch in text if unicodedata.category(ch) != "Cf")
    # casefold can produce new compatibility forms (rarely); normalising again makes the fold stable.
    text = unicodedata.normalize("NFKC", text)
    return _SEPARATORS_RE.sub("_", text.strip()).strip("_") or text.strip()
