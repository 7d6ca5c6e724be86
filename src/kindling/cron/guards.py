"""Guards a scheduled agent job passes before and while it runs.

- :func:`check_model_context` refuses a model whose context window is below ``MIN_CONTEXT_TOKENS``
  (a scheduled prompt plus skills plus tool results does not fit in less), unless the job states
  the context length itself. When the window cannot be found out the job proceeds (fail open), with
  a logged note, because refusing every unknown model would block every self-hosted one.
- :func:`classify_runtime` says whether the job runs on a cloud provider or locally.
- :func:`detect_provider_mismatch` warns when a prompt names a provider other than the active one.
- :func:`build_job_prompt` puts that runtime context in front of the job's guidance, skills and prompt.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import httpx

from kindling.config import hermes_home, kindling_home
from kindling.errors import ModelContextError

if TYPE_CHECKING:
    from kindling.cron.jobs import Job

log = logging.getLogger("kindling.cron")

MIN_CONTEXT_TOKENS = 64_000
DETECT_TIMEOUT = 5.0

Runtime = Literal["cloud", "local", "unknown"]
ContextSource = Literal["config", "endpoint", "ollama", "table", "unknown"]

LOCAL_PROVIDERS = frozenset({"ollama", "local"})
CLOUD_MODEL_PREFIXES = frozenset(
    {
        "nous",
        "openrouter",
        "anthropic",
        "openai",
        "gemini",
        "google",
        "mistral",
        "mistralai",
        "groq",
        "together",
        "deepseek",
        "xai",
        "x-ai",
        "fireworks",
        "cohere",
        "perplexity",
        "azure",
        "bedrock",
        "vertex",
    }
)

# Fields an OpenAI-compatible /models entry uses for the context window (vLLM, OpenRouter,
# LM Studio, llama.cpp, LiteLLM and friends each picked their own name).
_CONTEXT_FIELDS = (
    "context_length",
    "max_model_len",
    "context_window",
    "max_context_length",
    "max_context_tokens",
    "max_input_tokens",
    "context_size",
    "n_ctx",
    "n_ctx_train",
)

# Well-known context windows, matched on the longest prefix of the model name without its provider.
KNOWN_CONTEXT_LENGTHS: dict[str, int] = {
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude-3": 200_000,
    "claude-sonnet": 200_000,
    "claude-opus": 200_000,
    "claude-haiku": 200_000,
    "claude-2": 100_000,
    "claude": 200_000,
    "gemini-1.5-pro": 2_097_152,
    "gemini-1.5-flash": 1_048_576,
    "gemini-2": 1_048_576,
    "gemini": 1_048_576,
    "hermes-3": 131_072,
    "hermes-4": 131_072,
    "deepseek-chat": 65_536,
    "deepseek-v3": 131_072,
    "deepseek-r1": 131_072,
    "llama3.1": 131_072,
    "llama-3.1": 131_072,
    "llama3.2": 131_072,
    "llama-3.2": 131_072,
    "llama3.3": 131_072,
    "llama-3.3": 131_072,
    "llama3": 8_192,
    "llama-3": 8_192,
    "llama2": 4_096,
    "meta-llama-3.1": 131_072,
    "meta-llama-3": 8_192,
    "llama4": 1_048_576,
    "llama-4": 1_048_576,
    # Only the 7B model (and Ollama's "mistral") has 32k; the hosted families have 128k and must
    # not be blocked by a bare "mistral" prefix.
    "mistral": 32_768,
    "mistral-large": 131_072,
    "mistral-medium": 131_072,
    "mistral-small": 131_072,
    "mistral-nemo": 131_072,
    "mixtral": 32_768,
    "mixtral-8x22b": 65_536,
    "qwen2.5": 32_768,
    "qwen3": 40_960,
    "qwen3-coder": 262_144,
    "gpt-oss": 131_072,
    "command-r": 131_072,
    "phi3": 4_096,
    "phi-3": 4_096,
    "gemma2": 8_192,
    "gemma3": 131_072,
}


@dataclass(frozen=True)
class ContextCheck:
    """What :func:`check_model_context` found: the window (None = unknown) and where it came from."""

    model: str
    context_length: int | None
    source: ContextSource
    note: str = ""


def _bare_model(model: str) -> str:
    return model.split("/", 1)[1] if "/" in model else model


def _context_from_entry(entry: Mapping[str, Any]) -> int | None:
    for container in (entry, *[v for v in entry.values() if isinstance(v, Mapping)]):
        for field in _CONTEXT_FIELDS:
            value = container.get(field)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                return int(value)
            if isinstance(value, str) and value.isdigit() and int(value) > 0:
                return int(value)
    return None


def _auth_headers(api_key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _request_json(method: str, url: str, api_key: str, body: Any = None) -> Any:
    """Return the JSON an endpoint answers, or None when it is unreachable, refuses or is not JSON."""
    try:
        response = httpx.request(
            method, url, json=body, headers=_auth_headers(api_key), timeout=DETECT_TIMEOUT
        )
        response.raise_for_status()
        return response.json()
    except (httpx.HTTPError, ValueError) as exc:
        log.debug("%s %s failed: %s", method, url, exc)
        return None


def context_from_models_endpoint(model: str, base_url: str, api_key: str = "") -> int | None:
    """Return the context window an OpenAI-compatible ``GET {base_url}/models`` reports for ``model``.

    Returns None when the endpoint is unreachable, does not list the model, or gives no length.
    """
    payload = _request_json("GET", base_url.rstrip("/") + "/models", api_key)
    entries = payload.get("data") if isinstance(payload, dict) else payload
    if not isinstance(entries, list):
        return None
    wanted = {model, _bare_model(model)}
    for entry in entries:
        if isinstance(entry, Mapping) and (entry.get("id") in wanted or entry.get("name") in wanted):
            return _context_from_entry(entry)
    return None


def context_from_ollama(model: str, base_url: str, api_key: str = "") -> int | None:
    """Return the context window Ollama's ``POST /api/show`` reports (``model_info.*.context_length``).

    ``base_url`` may be the OpenAI-style ``.../v1`` URL. Returns None when it cannot be found out.
    """
    root = re.sub(r"/v1/?$", "", base_url.rstrip("/"))
    # Ollama names may hold slashes themselves ("hf.co/org/model:Q4_K_M"): strip only a local
    # provider prefix, never the first path part.
    name = _bare_model(model) if model_provider_prefix(model) in LOCAL_PROVIDERS else model
    payload = _request_json("POST", root + "/api/show", api_key, {"model": name})
    info = payload.get("model_info") if isinstance(payload, dict) else None
    if not isinstance(info, Mapping):
        return None
    for key, value in info.items():
        if str(key).endswith(".context_length") and isinstance(value, int) and value > 0:
            return value
    return None


def context_from_table(model: str) -> int | None:
    """Return the built-in context window for a well-known model (longest name prefix wins), or None.

    Only the last path part counts: gateways nest prefixes (``openrouter/meta-llama/llama-3.1-70b``).
    """
    name = model.rsplit("/", 1)[-1].strip().lower()
    best: str | None = None
    for prefix in KNOWN_CONTEXT_LENGTHS:
        if name.startswith(prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return KNOWN_CONTEXT_LENGTHS[best] if best else None


def detect_context_length(model: str, *, base_url: str = "", api_key: str = "") -> ContextCheck:
    """Find a model's context window: endpoint ``/models``, then Ollama ``/api/show``, then the table.

    Never raises: an undetectable window gives ``source="unknown"`` with a note.
    """
    if base_url:
        found = context_from_models_endpoint(model, base_url, api_key)
        if found:
            return ContextCheck(model, found, "endpoint")
        found = context_from_ollama(model, base_url, api_key)
        if found:
            return ContextCheck(model, found, "ollama")
    found = context_from_table(model)
    if found:
        return ContextCheck(model, found, "table")
    note = f"Context window of model {model!r} is unknown; running anyway (set the job's context length)."
    return ContextCheck(model, None, "unknown", note)


def check_model_context(
    model: str, *, base_url: str = "", api_key: str = "", config_context_length: int | None = None
) -> ContextCheck:
    """Return what was found about ``model``'s context window when it is enough (or unknown).

    An explicit ``config_context_length`` is the user's override and skips the check. A window that
    cannot be detected proceeds with a logged note. Raises ModelContextError when the window is
    below MIN_CONTEXT_TOKENS (exactly the minimum passes).
    """
    if config_context_length is not None:
        return ContextCheck(model, config_context_length, "config", "context length set in the job config")
    found = detect_context_length(model, base_url=base_url, api_key=api_key)
    if found.context_length is None:
        log.info(found.note)
        return found
    if found.context_length < MIN_CONTEXT_TOKENS:
        raise ModelContextError(
            f"Model {model!r} has a {found.context_length:,}-token context window ({found.source}); "
            f"scheduled jobs need at least {MIN_CONTEXT_TOKENS:,}. Use a larger model, or set the job's "
            "context length to override.",
            model=model,
            context_length=found.context_length,
            minimum=MIN_CONTEXT_TOKENS,
        )
    return found


def model_provider_prefix(model: str) -> str:
    """Return the provider prefix of ``provider/model`` names (lower case), or ``""``."""
    return model.split("/", 1)[0].strip().lower() if "/" in model else ""


# Hosts of well-known hosted APIs. A job that names none of --provider or a provider/ model
# prefix but points at one of these is not "local", whatever its bare model name says.
_PROVIDER_HOSTS: tuple[tuple[str, str], ...] = (
    ("api.openai.com", "openai"),
    ("openrouter.ai", "openrouter"),
    ("api.anthropic.com", "anthropic"),
    ("generativelanguage.googleapis.com", "gemini"),
    ("nousresearch.com", "nous"),
    ("api.mistral.ai", "mistral"),
    ("api.groq.com", "groq"),
    ("api.together.xyz", "together"),
    ("api.deepseek.com", "deepseek"),
    ("api.x.ai", "xai"),
    ("api.fireworks.ai", "fireworks"),
    ("openai.azure.com", "azure"),
)
_OLLAMA_PORT = 11434


def provider_from_base_url(base_url: str) -> str:
    """Return the provider a well-known endpoint URL belongs to (``ollama`` for port 11434), or ``""``."""
    try:
        parsed = httpx.URL(base_url.strip())
    except (httpx.InvalidURL, TypeError):
        return ""
    host = (parsed.host or "").lower()
    if not host:
        return ""
    if parsed.port == _OLLAMA_PORT:
        return "ollama"
    for suffix, provider in _PROVIDER_HOSTS:
        if host == suffix or host.endswith("." + suffix):
            return provider
    return ""


def runtime_provider(provider: str, model: str, base_url: str) -> str:
    """Return the provider a job runs on: its own setting, else the model's prefix, else the endpoint's host."""
    return (provider or "").strip() or model_provider_prefix(model) or provider_from_base_url(base_url)


def classify_runtime(provider: str, model: str) -> Runtime:
    """Return ``"local"``, ``"cloud"`` or ``"unknown"`` for a provider and model.

    A provider other than ollama/local is cloud; with no provider, a model prefixed by a known cloud
    provider is cloud, and ollama/local-prefixed or bare model names are local; nothing is unknown.
    """
    name = (provider or "").strip().lower()
    if name:
        return "local" if name in LOCAL_PROVIDERS else "cloud"
    model = (model or "").strip()
    if not model:
        return "unknown"
    prefix = model_provider_prefix(model)
    if prefix in CLOUD_MODEL_PREFIXES:
        return "cloud"
    return "local"


_PROVIDER_FAMILIES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ollama", re.compile(r"\bollama\b|\b(?:localhost|127\.0\.0\.1):11434\b", re.IGNORECASE)),
    ("openrouter", re.compile(r"\bopenrouter\b", re.IGNORECASE)),
    ("anthropic", re.compile(r"\banthropic\b|\bclaude\b", re.IGNORECASE)),
    ("openai", re.compile(r"\bopenai\b|\bchatgpt\b|\bgpt\b|\bgpt-?\d", re.IGNORECASE)),
    ("gemini", re.compile(r"\bgemini\b|\bgoogle\b", re.IGNORECASE)),
    ("nous", re.compile(r"\bnous(?:research)?\b", re.IGNORECASE)),
)


def provider_family(text: str) -> str | None:
    """Return the provider family an active provider name belongs to, or None when unknown."""
    for family, pattern in _PROVIDER_FAMILIES:
        if pattern.search(text or ""):
            return family
    return None


def detect_provider_mismatch(prompt: str, active_provider: str) -> str | None:
    """Return the provider family ``prompt`` names when it differs from ``active_provider``, else None.

    The earliest mention in the prompt wins. Unknown active providers give None. A warning, not an error.
    """
    active = provider_family(active_provider)
    if active is None or not prompt:
        return None
    mentions: list[tuple[int, str]] = []
    for family, pattern in _PROVIDER_FAMILIES:
        match = pattern.search(prompt)
        if match and family != active:
            mentions.append((match.start(), family))
    return min(mentions)[1] if mentions else None


def skill_roots() -> list[Path]:
    """Return where skills are looked up: ``$HERMES_HOME/skills`` then ``$KINDLING_HOME/skills``."""
    return [hermes_home() / "skills", kindling_home() / "skills"]


def load_skill(name: str) -> str | None:
    """Return the text of skill ``name`` (``<root>/**/<name>/SKILL.md``), or None when not found.

    Raises InvalidNameError for names that are not safe as paths.
    """
    from kindling.cron.jobs import validate_name

    validate_name(name, "skill name")
    for root in skill_roots():
        direct = root / name / "SKILL.md"
        candidates = [direct] if direct.is_file() else sorted(root.glob(f"*/{name}/SKILL.md"))
        for candidate in candidates:
            try:
                return candidate.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                log.warning("Cannot read skill %s: %s", candidate, exc)
    return None


def load_skills(names: list[str]) -> tuple[dict[str, str], list[str]]:
    """Return ``(texts by name, names not found)`` for a job's skills."""
    texts: dict[str, str] = {}
    missing: list[str] = []
    for name in names:
        text = load_skill(name)
        if text is None:
            missing.append(name)
        else:
            texts[name] = text
    return texts, missing


def runtime_block(model: str, provider: str) -> str:
    """Return the ``MODEL/PROVIDER/RUNTIME`` block, or ``""`` when neither model nor provider is known."""
    model = (model or "").strip()
    provider = (provider or "").strip() or model_provider_prefix(model)
    if not model and not provider:
        return ""
    lines = ["[Runtime context]"]
    if model:
        lines.append(f"MODEL: {model}")
    if provider:
        lines.append(f"PROVIDER: {provider}")
    runtime = classify_runtime(provider, model)
    if runtime == "local":
        lines.append("RUNTIME: local (a model on this machine or network; no data leaves it)")
    elif runtime == "cloud":
        lines.append("RUNTIME: cloud (a hosted provider; prompts and results are sent to it)")
    return "\n".join(lines)


def job_guidance(job: Job) -> str:
    """Return the scheduled-job guidance: no human is watching, and what ``[SILENT]`` does."""
    return (
        "[Scheduled job]\n"
        f"You are running as the scheduled job {job.name!r} (schedule: {job.schedule}). No human is "
        "watching this run: do the task below and reply with the result, which will be saved and "
        "delivered.\n"
        "If there is nothing worth reporting, begin your reply with [SILENT]: the output is then "
        "saved but not delivered."
    )


def build_job_prompt(
    job: Job,
    *,
    runtime_model: str = "",
    runtime_provider: str = "",
    skills: Mapping[str, str] | None = None,
) -> str:
    """Return the full prompt a prompt job sends: runtime block, job guidance, skills, then the prompt.

    The runtime block uses ``runtime_model``/``runtime_provider`` (falling back to the job's own
    model/provider; a provider is derived from the model's prefix when empty) and is left out when
    neither is known. ``skills`` maps skill names to text; None loads the job's skills from disk.
    """
    if skills is None:
        skills, _missing = load_skills(job.skills)
    parts = []
    block = runtime_block(runtime_model or job.model, runtime_provider or job.provider)
    if block:
        parts.append(block)
    parts.append(job_guidance(job))
    for name, text in skills.items():
        parts.append(f"[Skill: {name}]\n{text.strip()}")
    parts.append(job.prompt.strip())
    return "\n\n".join(parts)
