"""Guards: the context minimum (with real loopback endpoints), runtime class, provider mismatch, prompt."""

from __future__ import annotations

import logging
import socket
from pathlib import Path
from typing import Any

import pytest

from fake_openai import FakeOpenAI
from kindling.cron.guards import (
    MIN_CONTEXT_TOKENS,
    build_job_prompt,
    check_model_context,
    classify_runtime,
    context_from_table,
    detect_provider_mismatch,
    load_skills,
    provider_from_base_url,
    runtime_provider,
)
from kindling.cron.jobs import Job, make_job
from kindling.errors import InvalidNameError, ModelContextError


def _dead_url() -> str:
    # A port nothing listens on: bind, read the port, close.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


# --- check_model_context -------------------------------------------------------------------------


def test_endpoint_models_metadata_below_minimum_raises(fake_openai: FakeOpenAI) -> None:
    fake_openai.models = [{"id": "small-model", "object": "model", "context_length": 8192}]
    with pytest.raises(ModelContextError) as info:
        check_model_context("small-model", base_url=fake_openai.base_url)
    assert info.value.context_length == 8192
    assert info.value.minimum == MIN_CONTEXT_TOKENS
    assert "64,000" in str(info.value)
    assert any(r["path"].endswith("/models") for r in fake_openai.requests)


def test_exactly_the_minimum_passes(fake_openai: FakeOpenAI) -> None:
    fake_openai.models = [{"id": "edge", "context_length": MIN_CONTEXT_TOKENS}]
    found = check_model_context("edge", base_url=fake_openai.base_url)
    assert found.context_length == 64_000
    assert found.source == "endpoint"


def test_one_token_under_the_minimum_is_refused(fake_openai: FakeOpenAI) -> None:
    fake_openai.models = [{"id": "edge", "context_length": MIN_CONTEXT_TOKENS - 1}]
    with pytest.raises(ModelContextError):
        check_model_context("edge", base_url=fake_openai.base_url)


@pytest.mark.parametrize("field", ["max_model_len", "context_window", "max_context_length"])
def test_other_metadata_field_names_are_understood(fake_openai: FakeOpenAI, field: str) -> None:
    fake_openai.models = [{"id": "m", field: 4096}]
    with pytest.raises(ModelContextError):
        check_model_context("m", base_url=fake_openai.base_url)


def test_nested_openrouter_style_metadata_and_provider_prefix(fake_openai: FakeOpenAI) -> None:
    fake_openai.models = [{"id": "meta/llama-x", "top_provider": {"context_length": 131072}}]
    found = check_model_context("meta/llama-x", base_url=fake_openai.base_url)
    assert (found.context_length, found.source) == (131072, "endpoint")


def test_config_override_skips_the_check_and_the_endpoint(fake_openai: FakeOpenAI) -> None:
    fake_openai.models = [{"id": "small-model", "context_length": 4096}]
    found = check_model_context("small-model", base_url=fake_openai.base_url, config_context_length=4096)
    assert found.source == "config"
    assert found.context_length == 4096
    assert fake_openai.requests == []


def test_ollama_api_show_is_used_when_models_has_no_length(fake_openai: FakeOpenAI) -> None:
    fake_openai.models = [{"id": "qwen-tiny", "object": "model"}]
    fake_openai.ollama_show = {"qwen-tiny": {"model_info": {"qwen2.context_length": 2048}}}
    with pytest.raises(ModelContextError) as info:
        check_model_context("qwen-tiny", base_url=fake_openai.base_url)
    assert info.value.context_length == 2048
    show = [r for r in fake_openai.requests if r["path"] == "/api/show"]
    assert show and show[0]["body"]["model"] == "qwen-tiny"


def test_ollama_large_context_passes(fake_openai: FakeOpenAI) -> None:
    fake_openai.ollama_show = {"big": {"model_info": {"llama.context_length": 131072}}}
    found = check_model_context("ollama/big", base_url=fake_openai.root_url)
    assert (found.context_length, found.source) == (131072, "ollama")


def test_builtin_table_when_the_endpoint_knows_nothing(fake_openai: FakeOpenAI) -> None:
    with pytest.raises(ModelContextError) as info:
        check_model_context("gpt-4", base_url=fake_openai.base_url)
    assert info.value.context_length == 8192
    found = check_model_context("openai/gpt-4o-mini", base_url=fake_openai.base_url)
    assert (found.context_length, found.source) == (128_000, "table")


def test_table_prefers_the_longest_prefix() -> None:
    assert context_from_table("llama3.1:8b") == 131_072
    assert context_from_table("llama3:8b") == 8_192
    assert context_from_table("anthropic/claude-sonnet-4") == 200_000
    assert context_from_table("totally-new-model") is None


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        # Gateways nest a vendor prefix under their own: the table looks at the last part.
        ("openrouter/meta-llama/llama-3.1-70b-instruct", 131_072),
        ("openrouter/anthropic/claude-3.5-sonnet", 200_000),
        ("openrouter/nousresearch/hermes-3-llama-3.1-405b", 131_072),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", 131_072),
        ("meta-llama/Meta-Llama-3-8B-Instruct", 8_192),
    ],
)
def test_table_reads_the_last_part_of_nested_model_names(model: str, expected: int) -> None:
    assert context_from_table(model) == expected


@pytest.mark.parametrize("model", ["mistral-large-latest", "mistral-small-latest", "mistralai/mistral-nemo"])
def test_hosted_mistral_models_are_not_blocked_by_the_7b_entry(model: str) -> None:
    found = check_model_context(model)
    assert found.source == "table"
    assert found.context_length is not None and found.context_length >= MIN_CONTEXT_TOKENS
    with pytest.raises(ModelContextError):
        check_model_context("mistral:7b")


def test_ollama_names_with_slashes_are_asked_for_whole(fake_openai: FakeOpenAI) -> None:
    name = "hf.co/bartowski/Qwen-Tiny-GGUF:Q4_K_M"
    fake_openai.ollama_show = {name: {"model_info": {"qwen2.context_length": 4096}}}
    with pytest.raises(ModelContextError) as info:
        check_model_context(name, base_url=fake_openai.base_url)
    assert info.value.context_length == 4096
    # A local provider prefix is still taken off: Ollama does not know "ollama/...".
    fake_openai.ollama_show = {"tiny": {"model_info": {"llama.context_length": 2048}}}
    with pytest.raises(ModelContextError):
        check_model_context("ollama/tiny", base_url=fake_openai.base_url)


def test_failed_detection_fails_open_with_a_logged_note(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="kindling.cron"):
        found = check_model_context("homebrew-model-7b", base_url=_dead_url())
    assert found.context_length is None
    assert found.source == "unknown"
    assert "unknown" in found.note
    assert any("homebrew-model-7b" in r.getMessage() for r in caplog.records)


def test_no_base_url_and_unknown_model_fails_open() -> None:
    assert check_model_context("mystery").source == "unknown"


def test_malformed_models_payload_is_not_fatal(fake_openai: FakeOpenAI) -> None:
    fake_openai.models = [{"id": "m", "context_length": "lots"}, "not-an-entry"]  # type: ignore[list-item]
    found = check_model_context("m", base_url=fake_openai.base_url)
    assert found.source == "unknown"


# --- classify_runtime ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("openai", "gpt-4o", "cloud"),
        ("openrouter", "", "cloud"),
        ("custom-vllm", "llama3", "cloud"),
        ("ollama", "llama3.1", "local"),
        ("local", "", "local"),
        ("Ollama", "anthropic/claude", "local"),
        ("", "anthropic/claude-sonnet-4", "cloud"),
        ("", "nous/hermes-4-70b", "cloud"),
        ("", "openrouter/meta-llama/llama-3-70b", "cloud"),
        ("", "gemini/gemini-2.5-pro", "cloud"),
        ("", "openai/gpt-4o", "cloud"),
        ("", "ollama/llama3.1", "local"),
        ("", "local/qwen", "local"),
        ("", "llama3.1:8b", "local"),
        ("", "", "unknown"),
        ("  ", "  ", "unknown"),
    ],
)
def test_classify_runtime(provider: str, model: str, expected: str) -> None:
    assert classify_runtime(provider, model) == expected


@pytest.mark.parametrize(
    ("base_url", "expected"),
    [
        ("https://api.openai.com/v1", "openai"),
        ("https://openrouter.ai/api/v1", "openrouter"),
        ("https://generativelanguage.googleapis.com/v1beta/openai/", "gemini"),
        ("https://my-resource.openai.azure.com/openai", "azure"),
        ("http://localhost:11434/v1", "ollama"),
        ("http://gpu-box.lan:11434", "ollama"),
        ("http://127.0.0.1:8000/v1", ""),
        ("https://api.openai.com.evil.example/v1", ""),
        ("", ""),
        ("not a url", ""),
    ],
)
def test_provider_from_base_url(base_url: str, expected: str) -> None:
    assert provider_from_base_url(base_url) == expected


def test_a_bare_model_on_a_hosted_endpoint_is_not_called_local() -> None:
    # No --provider and no prefix: the endpoint's host decides, so the model is not told "local".
    provider = runtime_provider("", "gpt-4o", "https://api.openai.com/v1")
    assert provider == "openai"
    text = build_job_prompt(_job(), runtime_model="gpt-4o", runtime_provider=provider)
    assert "PROVIDER: openai" in text and "RUNTIME: cloud" in text
    # The job's own setting and the model's prefix come first; an unknown host leaves it local.
    assert runtime_provider("ollama", "gpt-4o", "https://api.openai.com/v1") == "ollama"
    assert runtime_provider("", "anthropic/claude-sonnet-4", "https://openrouter.ai/api/v1") == "anthropic"
    assert runtime_provider("", "llama3.1", "http://127.0.0.1:8000/v1") == ""


# --- detect_provider_mismatch -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "active", "expected"),
    [
        ("Summarise this with Claude please", "openai", "anthropic"),
        ("Ask GPT-4 for a second opinion", "anthropic", "openai"),
        ("Use the model at localhost:11434", "openai", "ollama"),
        ("Run it on Ollama", "anthropic", "ollama"),
        ("Search Google for news", "openai", "gemini"),
        ("route via OpenRouter", "nous", "openrouter"),
        ("ask Nous about it", "openai", "nous"),
        ("Use claude for this", "anthropic", None),
        ("Use claude for this", "Claude", None),
        ("Compare with gemini", "google", None),
        ("Nothing about providers here", "openai", None),
        ("Use claude", "my-own-gateway", None),
        ("Use claude", "", None),
        ("a gptq-quantised model", "anthropic", None),
    ],
)
def test_detect_provider_mismatch(prompt: str, active: str, expected: str | None) -> None:
    assert detect_provider_mismatch(prompt, active) == expected


def test_mismatch_reports_the_earliest_named_provider() -> None:
    assert detect_provider_mismatch("First gemini, then claude", "openai") == "gemini"


# --- build_job_prompt ---------------------------------------------------------------------------


def _job(**fields: Any) -> Job:
    return make_job("report", "prompt", "every 1h", prompt="Write the daily report.", **fields)


def test_prompt_has_runtime_block_before_guidance_then_skills_then_prompt() -> None:
    job = _job(model="anthropic/claude-sonnet-4")
    text = build_job_prompt(job, skills={"reporting": "Use bullet points."})
    assert "MODEL: anthropic/claude-sonnet-4" in text
    assert "PROVIDER: anthropic" in text  # derived from the model's prefix
    assert "RUNTIME: cloud" in text
    order = [
        text.index("MODEL:"),
        text.index("[Scheduled job]"),
        text.index("[SILENT]"),
        text.index("Use bullet points."),
        text.index("Write the daily report."),
    ]
    assert order == sorted(order)
    assert text.endswith("Write the daily report.")


def test_runtime_arguments_override_the_job_and_local_is_named() -> None:
    job = _job(model="openai/gpt-4o", provider="openai")
    text = build_job_prompt(job, runtime_model="llama3.1", runtime_provider="ollama")
    assert "MODEL: llama3.1" in text
    assert "PROVIDER: ollama" in text
    assert "RUNTIME: local" in text
    assert "gpt-4o" not in text


def test_bare_model_without_provider_has_no_provider_line_and_is_local() -> None:
    text = build_job_prompt(_job(), runtime_model="qwen2.5:7b")
    assert "MODEL: qwen2.5:7b" in text
    assert "PROVIDER:" not in text
    assert "RUNTIME: local" in text


def test_no_block_without_model_and_provider() -> None:
    text = build_job_prompt(_job())
    assert "MODEL:" not in text
    assert "PROVIDER:" not in text
    assert "RUNTIME:" not in text
    assert text.startswith("[Scheduled job]")


def test_provider_only_gives_a_block() -> None:
    text = build_job_prompt(_job(), runtime_provider="openrouter")
    assert text.startswith("[Runtime context]\nPROVIDER: openrouter\nRUNTIME: cloud")


def test_skills_load_from_hermes_home_and_missing_ones_are_reported(isolated_homes: Path) -> None:
    skill = isolated_homes / "hermes" / "skills" / "devops" / "deploy-check" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: deploy-check\n---\nCheck the deploy.\n", encoding="utf-8")
    texts, missing = load_skills(["deploy-check", "absent"])
    assert "Check the deploy." in texts["deploy-check"]
    assert missing == ["absent"]
    job = _job(skills=["deploy-check"])
    assert "[Skill: deploy-check]" in build_job_prompt(job)


def test_skill_names_that_are_paths_are_refused() -> None:
    with pytest.raises(InvalidNameError):
        load_skills(["../../etc"])
