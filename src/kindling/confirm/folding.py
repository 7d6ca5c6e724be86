"""One fold for action names, shared by every rule that compares them (rate limits, the high-risk set).

Two spellings an approver would read as the same action must fold to the same key: case, runs of
spaces, '-', '.' and '_', and Unicode compatibility forms (full-width letters, ligatures) all fold
away. A leaf module so the store and the policy rules use the same function.
"""

from __future__ import annotations

import re
import unicodedata

_SEPARATORS_RE = re.compile(r"[\s._\-]+")


def fold_action(action: str) -> str:
    """Return ``action`` folded for comparison: NFKC, case-folded, separator runs as one '_'.

    ``Deploy-Production``, ``DEPLOY_PRODUCTION`` and full-width ``ｄｅｐｌｏｙ＿ｐｒｏｄｕｃｔｉｏｎ`` all
    fold to ``deploy_production``.
    """
    text = unicodedata.normalize("NFKC", action).casefold()
    # casefold can produce new compatibility forms (rarely); normalising again makes the fold stable.
    text = unicodedata.normalize("NFKC", text)
    return _SEPARATORS_RE.sub("_", text.strip()).strip("_") or text.strip()
