"""Text that tries to steer an agent: prompt injection, promptware, secrets sent out, found by one set of patterns.

Two readers use it. Memory writes (``kindling.review.memory``) refuse an entry that matches any
pattern here, since memory is pasted into every future system prompt; they refuse at least every
class Hermes Agent's own memory scan blocks. Mining (``kindling.mining``, ``kindling.templates``)
drops a past example or episode whose request, arguments or result carries an instruction to the
agent (``instruction_in``): a poisoned web page or file read in one session must not come back as a
"past example" for the next. Mining leaves out the memory-only classes (names of attack tools,
reading ``.env``, touching ``~/.ssh``): commands and results mention them in ordinary work.

Plain bossy English ("always run the tests") is a legitimate preference, not an injection. Words
between key terms are bounded so matching stays linear. Text is folded with NFKC first, so
full-width look-alikes read as ASCII.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "HIDDEN_CHARS",
    "INSTRUCTION_PATTERNS",
    "MEMORY_PATTERNS",
    "PROMPTWARE_PATTERNS",
    "SECRET_PATTERNS",
    "fold",
    "instruction_in",
]

# Invisible and direction-changing characters: what a reader sees is not what the model reads.
HIDDEN_CHARS = frozenset(
    "\u200b\u200c\u200d\u2060\u2062\u2063\u2064\ufeff\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
_W = r"(?:\w+\s+){0,8}"  # up to eight filler words
_LINE = r"[^\n]{0,2048}"  # the rest of a line, bounded
_SECRET_NAME = r"\$\{?\w*(?:key|token|secret|password|credential|api)"
_EDIT = r"(?:update|modify|edit|write|change|append|add\s+to|overwrite|replace)"
# Hijacking the agent's instructions or identity, and instructions hidden from the reader. Each rule
# names the words every match holds (all of its groups, any word of a group, in lower case), so a
# text without them is not scanned with its expression: mining checks every kept call's result.
_INSTRUCTION_RULES: tuple[tuple[str, str, tuple[tuple[str, ...], ...]], ...] = (
    (
        rf"ignore\s+{_W}(?:previous|prior|above|all|earlier)\s+{_W}instructions",
        "overrides instructions",
        (("ignore",), ("instructions",)),
    ),
    (
        rf"disregard\s+{_W}(?:your|all|any|the)\s+{_W}(?:instructions|rules|guidelines)",
        "overrides instructions",
        (("disregard",),),
    ),
    (r"system\s+prompt\s+override", "overrides the system prompt", (("override",),)),
    (
        rf"act\s+as\s+(?:if|though)\s+{_W}you\s+{_W}(?:have\s+no|don't\s+have|do\s+not\s+have)\s+"
        rf"{_W}(?:restrictions|limits|rules)",
        "lifts the agent's restrictions",
        (("act",), ("restrictions", "limits", "rules")),
    ),
    (rf"do\s+not\s+{_W}tell\s+{_W}the\s+user", "hides things from the user", (("tell",), ("user",))),
    (rf"you\s+are\s+{_W}now\s+(?:a|an|the)\s+", "replaces the agent's identity", (("you",), ("now",))),
    (rf"pretend\s+{_W}(?:you\s+are|to\s+be)\s+", "replaces the agent's identity", (("pretend",),)),
    (r"\bname\s+yourself\s+\w+", "replaces the agent's identity", (("yourself",),)),
    (
        rf"you\s+have\s+been\s+{_W}(?:updated|upgraded|patched)\s+to",
        "claims a fake update",
        (("been",), ("updated", "upgraded", "patched")),
    ),
    (rf"output\s+{_W}(?:system|initial)\s+prompt", "leaks the system prompt", (("output",), ("prompt",))),
    (
        rf"(?:respond|answer|reply)\s+without\s+{_W}(?:restrictions|limitations|filters|safety)",
        "lifts the agent's restrictions",
        (("without",), ("restrictions", "limitations", "filters", "safety")),
    ),
    (
        r"<!--[^>]{0,512}(?:ignore|override|system|secret|hidden)[^>]{0,512}-->",
        "hides instructions",
        (("<!--",),),
    ),
    (r"<\s*div\s+style\s*=\s*[\"'][^>]{0,2048}display\s*:\s*none", "hides instructions", (("display",),)),
    (
        r"translate\s+[^\n]{0,512}\s+into\s+[^\n]{0,512}\s+and\s+(?:execute|run|eval)",
        "runs hidden code",
        (("translate",),),
    ),
)
_INSTRUCTIONS = tuple(
    (re.compile(pattern, re.IGNORECASE), why, words) for pattern, why, words in _INSTRUCTION_RULES
)
INSTRUCTION_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (regex, why) for regex, why, _ in _INSTRUCTIONS
)
# Any rule's first words, searched once: most texts hold none, and are done with in one search.
_FIRST_WORDS = re.compile(
    "|".join(sorted({re.escape(word) for _p, _w, words in _INSTRUCTION_RULES for word in words[0]}))
)

# Promptware and command-and-control vocabulary.
PROMPTWARE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), why)
    for pattern, why in (
        (r"register\s+(?:as\s+)?a?\s*node", "joins a command-and-control network"),
        (r"(?:heartbeat|beacon|check[\s-]?in)\s+(?:to|with)\s+", "joins a command-and-control network"),
        (r"pull\s+(?:down\s+)?(?:new\s+)?task(?:ing|s)?\b", "joins a command-and-control network"),
        (r"connect\s+to\s+the\s+network\b", "joins a command-and-control network"),
        (
            r"you\s+must\s+(?:\w+\s+){0,3}(?:register|connect|report|beacon)\b",
            "joins a command-and-control network",
        ),
        (r"only\s+use\s+one[\s-]?liners?\b", "hides its tracks"),
        (rf"never\s+{_W}(?:create|write)\s+{_W}(?:script|file)\s+{_W}disk", "hides its tracks"),
        (
            r"unset\s+\w*(?:claude|codex|hermes|agent|openai|anthropic)\w*",
            "tampers with the agent's environment",
        ),
        (r"\b(?:cobalt\s*strike|sliver|havoc|mythic|metasploit|brainworm)\b", "names an attack framework"),
        (
            r"\bc2\s+(?:server|channel|infrastructure|beacon)\b|\bcommand\s+and\s+control\b",
            "names an attack framework",
        ),
    )
)

# Sending data out, reading or embedding secrets; persistence through SSH keys, Hermes's secrets and
# the agent's own configuration.
SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), why)
    for pattern, why in (
        (rf"\b(?:curl|wget)\s+{_LINE}{_SECRET_NAME}", "sends a secret over the network"),
        (rf"\bcat\s+{_LINE}(?:\.env|credentials|\.netrc|\.pgpass|\.npmrc|\.pypirc)", "reads secrets"),
        (rf"(?:send|post|upload|transmit)\s+{_LINE}\s+(?:to|at)\s+https?://", "sends data to a URL"),
        (
            rf"(?:include|output|print|share)\s+{_W}(?:conversation|chat\s+history|previous\s+messages|"
            r"full\s+context|entire\s+context)",
            "copies the conversation out",
        ),
        (
            r"(?:api[_-]?key|token|secret|password)\s*[=:]\s*[\"'][A-Za-z0-9+/=_-]{20,}",
            "holds a hard-coded secret",
        ),
        # Persistence: SSH keys, Hermes's secrets and the agent's own configuration.
        (r"authorized_keys|~/\.ssh|\$HOME/\.ssh", "touches SSH credentials"),
        (r"(?:~|\$HOME)/\.hermes/\.env", "touches Hermes's secrets"),
        (
            rf"{_EDIT}\s+{_LINE}(?:AGENTS\.md|CLAUDE\.md|\.cursorrules|\.clinerules)",
            "changes agent configuration",
        ),
        (rf"{_EDIT}\s+{_LINE}\.hermes/(?:config\.yaml|SOUL\.md)", "changes agent configuration"),
    )
)

#: Every pattern a memory write must not match.
MEMORY_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    INSTRUCTION_PATTERNS + PROMPTWARE_PATTERNS + SECRET_PATTERNS
)


def fold(text: str) -> str:
    """Return ``text`` with compatibility characters folded (NFKC): full-width letters read as ASCII."""
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def instruction_in(text: str) -> str | None:
    """Return what ``text`` tries to make an agent do (a few words), or None when it gives no instruction.

    Checks ``INSTRUCTION_PATTERNS``: overriding instructions, replacing the agent's identity, lifting
    its restrictions, leaking its prompt, hiding instructions in markup.
    """
    if not text:
        return None
    folded = fold(text)
    lower = folded.lower()
    if _FIRST_WORDS.search(lower) is None:
        return None
    for regex, why, words in _INSTRUCTIONS:
        if all(any(word in lower for word in group) for group in words) and regex.search(folded):
            return why
    return None
