"""Personal agents and models in the hub page, in a real headless Chromium against real api and
worker processes and the fake OpenAI server: a chat user makes an agent (name, description,
icon, system prompt, suggested prompts, a model, the Calculator), chats with it, renames and
deletes it; a model answers directly."""

from __future__ import annotations

from tests.hub.conftest import CREDENTIAL, MODEL
from tests.hub_page.conftest import CHAT_USER
from tests.hub_page.page import Hub, expect

GPT = f"openai:{CREDENTIAL['id']}:{MODEL}"
INSTRUCTIONS = "Answer in one sentence.\nShow your working."


def _system_prompts(server, question: str) -> list[str]:
    """The system messages of the model requests that asked `question`."""
    found = []
    for request in server.requests:
        messages = (request.get("body") or {}).get("messages") or []
        if any(m.get("role") == "user" and m.get("content") == question for m in messages):
            found += [str(m["content"]) for m in messages if m.get("role") == "system"]
    return found


def test_a_personal_agent_with_a_system_prompt_and_the_calculator_answers(
    site, browsing, fake_model
):
    server, _ = fake_model
    page = browsing.tab()
    hub = Hub(page, site.base)
    hub.sign_in(CHAT_USER)
    page.click("#open-agents")
    dialog = page.locator("#agents-dialog")
    expect(dialog.locator("#agents-list")).to_contain_text("No personal agents yet.")
    page.click("#new-agent")
    page.fill("#agent-name", "Sums")
    page.fill("#agent-description", "Adds things up.")
    page.fill("#agent-icon", "🧮")
    page.fill("#agent-system-prompt", INSTRUCTIONS)
    for n in range(1, 7):
        page.click("#add-prompt")
        page.locator(".agent-prompt").last.fill(f"What is 6 * {n}?")
    expect(page.locator("#add-prompt")).to_be_disabled()  # n8n's most: 6
    page.locator(".remove-prompt").last.click()
    page.select_option("#agent-model", GPT)
    dialog.get_by_label("Calculator").check()
    page.click("#save-agent")
    expect(dialog).to_be_hidden()

    expect(page.locator("#picker option:checked")).to_have_text("🧮 Sums")
    expect(page.locator(".greeting .muted")).to_have_text("Adds things up.")
    expect(page.locator(".suggested-prompt")).to_have_count(5)
    answer = hub.answer(page.locator(".suggested-prompt").first.click)
    assert answer == "Based on the tools: Calculator returned 6."
    prompts = _system_prompts(server, "What is 6 * 1?")
    quoted = "## Instructions from the user\n> Answer in one sentence.\n> Show your working."
    assert prompts and all(p.startswith("You are a helpful assistant.") for p in prompts)
    assert all(p.endswith(quoted) for p in prompts)

    page.click("#open-agents")
    dialog.locator("li", has_text="Sums").locator(".edit-agent").click()
    expect(page.locator("#agent-system-prompt")).to_have_value(INSTRUCTIONS)
    expect(page.locator(".agent-prompt")).to_have_count(5)
    page.fill("#agent-name", "Sums and more")
    page.click("#save-agent")
    expect(page.locator("#picker option:checked")).to_have_text("🧮 Sums and more")

    page.click("#open-agents")
    page.once("dialog", lambda d: d.accept())
    dialog.locator("li", has_text="Sums and more").locator(".delete-agent").click()
    expect(dialog.locator("#agents-list")).to_contain_text("No personal agents yet.")
    expect(page.locator("#picker option", has_text="Sums")).to_have_count(0)
    assert browsing.errors == []


def test_models_answer_directly_and_remember_the_branch(site, browsing):
    page = browsing.tab()
    hub = Hub(page, site.base)
    hub.sign_in(CHAT_USER)
    hub.pick("mock:mock")
    expect(page.locator("#picker option:checked")).to_have_text("Mock model")
    assert hub.ask("Hello there") == "You said: Hello there"
    page.click("#new-chat")
    expect(page.locator("#messages > li.message")).to_have_count(0)
    hub.pick(GPT)
    assert hub.ask("My name is Ada") == "Nice to meet you, Ada!"
    assert hub.ask("What is my name?") == "Your name is Ada."
    assert browsing.errors == []
