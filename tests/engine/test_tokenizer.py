"""Token counts for maxTokensFromMemory (engine/tokenizer.py): the model's own encoding where
LangChain JS would use one, the shipped ranks (no download), else LangChain's length / 4."""

from __future__ import annotations

import pytest

from engine.tokenizer import counter, encoding_name, estimate

# Counted by tiktoken 0.14 with the same ranks (OpenAI's cl100k_base / o200k_base).
TEXTS = ["Based on the tools: Calculator returned 437.", "héllo 👋 naïve café — ünïcödé"]


@pytest.mark.parametrize(
    ("model", "encoding", "counts"),
    [
        ("gpt-4.1-mini", "o200k_base", [10, 12]),
        ("gpt-4o-2024-08-06", "o200k_base", [10, 12]),
        ("gpt-5-nano", "o200k_base", [10, 12]),
        ("gpt-4", "cl100k_base", [10, 16]),
        ("gpt-4-0125-preview", "cl100k_base", [10, 16]),
        ("gpt-3.5-turbo-0125", "cl100k_base", [10, 16]),
    ],
)
def test_an_openai_model_is_counted_with_its_encoding(model, encoding, counts):
    assert encoding_name(model) == encoding
    count = counter(model)
    assert [count(text) for text in TEXTS] == counts


@pytest.mark.parametrize("model", [None, "llama3.1:8b", "qwen2.5", "davinci-002", "gpt2"])
def test_other_models_are_estimated_as_langchain_does(model):
    assert encoding_name(model) is None
    assert counter(model) is estimate


def test_the_estimate_is_a_quarter_of_the_javascript_length_rounded_up():
    assert estimate("") == 0
    assert estimate("abcde") == 2
    assert estimate("👋👋") == 1  # two UTF-16 code units each, as String.length counts them


def test_special_tokens_in_a_message_are_estimated_as_js_tiktoken_refuses_them():
    text = "before <|endoftext|> after"
    assert counter("gpt-4o")(text) == estimate(text)
