"""Synthetic past sessions for ``kindling eval``'s tests, and the oracle a fake model answers from.

``write_sessions`` writes OpenAI-format chat JSONL: a travel assistant's sessions in five task
families (weather, forecasts, currency, restaurants, flights), each family asked in several
phrasings (each phrasing is a task, with a ``task_id``), each task run a few times with different
values. Flights take two steps (search, then book the flight the search found); some bookings fail
first ("flight not found") and some conversions fail on an amount that is not a number.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from fake_models import conversation_key
from kindling.eval.plan import EvalPlan
from kindling.eval.score import CALL

CITIES = ["Lisbon", "Oslo", "Vienna", "Dublin", "Prague", "Madrid", "Athens", "Zagreb", "Riga", "Tallinn"]
CURRENCIES = ["EUR", "USD", "GBP", "JPY", "CHF"]
CUISINES = ["Thai", "Italian", "Greek", "Indian", "Mexican"]

FAMILIES: dict[str, list[str]] = {
    "weather": [
        "What is the weather like in {city} today?",
        "Is it raining in {city} right now? I need the current weather before I go out.",
        "Tell me the present weather conditions in {city}, please.",
    ],
    "forecast": [
        "Give me the forecast for {city} for the next {days} days.",
        "Will it be sunny in {city} over the coming {days} days? Show the forecast.",
        "I am planning a trip: what does the {days} day forecast for {city} say?",
    ],
    "currency": [
        "Convert {amount} {source} into {target} for me.",
        "How much is {amount} {source} worth in {target} at today's exchange rate?",
        "I have {amount} {source}; what would that be in {target} money?",
    ],
    "restaurant": [
        "Find a good {cuisine} restaurant in {city}.",
        "Where can I eat {cuisine} food tonight in {city}? Recommend a restaurant.",
        "Suggest a {cuisine} place to have dinner while I am visiting {city}.",
    ],
    "flight": [
        "Book me the cheapest flight from {city} to {other}.",
        "I need to fly from {city} to {other}: search the flights and book one.",
        "Get me on a plane from {city} to {other}, whichever flight is cheapest.",
    ],
}

TOOLS = [
    "book_flight",
    "convert_currency",
    "find_restaurant",
    "get_forecast",
    "get_weather",
    "search_flights",
]


def _call(ids: list[int], name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str]:
    ids[0] += 1
    call_id = f"call_{ids[0]}"
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
        ],
    }
    return message, call_id


def _session(family: str, phrasing: int, rng: random.Random, number: int, failures: bool) -> dict[str, Any]:
    city, other = rng.sample(CITIES, 2)
    values = {
        "city": city,
        "other": other,
        "days": rng.choice([3, 5, 7]),
        "amount": rng.choice([50, 120, 300, 75]),
        "source": CURRENCIES[number % 5],
        "target": CURRENCIES[(number + 2) % 5],
        "cuisine": rng.choice(CUISINES),
    }
    request = FAMILIES[family][phrasing].format(**values)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a travel assistant. Use the tools to answer."},
        {"role": "user", "content": request},
    ]
    ids = [number * 100]

    def step(name: str, arguments: dict[str, Any], result: str) -> None:
        message, call_id = _call(ids, name, arguments)
        messages.append(message)
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})

    if family == "weather":
        step("get_weather", {"city": city}, json.dumps({"city": city, "sky": "cloudy", "celsius": 14}))
    elif family == "forecast":
        step(
            "get_forecast",
            {"city": city, "days": values["days"]},
            json.dumps({"days": ["sun"] * values["days"]}),
        )
    elif family == "currency":
        if failures and number % 4 == 0:
            step(
                "convert_currency",
                {"amount": "some", "source": values["source"], "target": values["target"]},
                "Error: amount must be a number",
            )
        step(
            "convert_currency",
            {"amount": values["amount"], "source": values["source"], "target": values["target"]},
            json.dumps({"converted": values["amount"] * 1.1}),
        )
    elif family == "restaurant":
        step(
            "find_restaurant",
            {"city": city, "cuisine": values["cuisine"]},
            json.dumps({"name": "Casa Nova", "rating": 4.5}),
        )
    else:
        flight = f"FL{rng.randint(100, 999)}"
        step(
            "search_flights",
            {"origin": city, "destination": other},
            json.dumps({"flights": [{"id": flight, "price": 99}]}),
        )
        if failures and number % 3 == 0:
            step("book_flight", {"flight_id": "FL000"}, "Error: flight FL000 not found")
        step("book_flight", {"flight_id": flight}, json.dumps({"booked": flight, "seat": "12A"}))
    messages.append({"role": "user", "content": "Thanks!"})
    messages.append({"role": "assistant", "content": "You are welcome. Anything else?"})
    return {
        "id": f"{family}-{phrasing}-{number}",
        "messages": messages,
        "metadata": {"task_id": f"{family}-{phrasing}"},
    }


def write_sessions(path: Path, *, runs: int = 3, seed: int = 0, failures: bool = True) -> Path:
    """Write ``runs`` sessions of every (family, phrasing) task to ``path`` (JSONL) and return it."""
    rng = random.Random(seed)
    lines = []
    number = 0
    for family, phrasings in FAMILIES.items():
        for phrasing in range(len(phrasings)):
            for _ in range(runs):
                number += 1
                lines.append(json.dumps(_session(family, phrasing, rng, number, failures)))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def oracle_of(plan: EvalPlan) -> dict[str, tuple[str, dict[str, Any]]]:
    """The right call of every CALL case of ``plan``, by the key of its conversation as sent."""
    return {
        conversation_key(planned.cold): (planned.case.expected[0][0], planned.case.expected[0][1])
        for planned in plan.cases
        if planned.case.kind == CALL
    }
