"""Research: searching, reading and comparing sources on the web (``research``)."""

from __future__ import annotations

from kindling.sessions.sample_data import (
    Request,
    Task,
    browse,
    extract,
    remember,
    search,
    write,
)

_REMEMBER_SOURCES = Request(
    "Remember that I prefer primary sources over blog posts.",
    (remember("The user prefers primary sources (docs, papers) over blog posts."),),
    "Noted: official docs and papers first.",
)
_BENCHMARK = Request(
    "Find a benchmark comparing them.",
    (
        search(
            "{a} vs {b} benchmark",
            (
                (
                    "{a} vs {b}: benchmark results",
                    "https://blog.example.net/{pair_slug}-benchmark",
                    "Throughput and latency, same hardware.",
                ),
            ),
            weight=2,
        ),
        extract(
            ("https://blog.example.net/{pair_slug}-benchmark",),
            "# Benchmark\n\nSame machine, same data; three workloads, each run five times.",
        ),
    ),
    "The benchmark above runs both on the same hardware; read its caveats before relying on it.",
    weight=3,
)
_IN_PRACTICE = Request(
    "Which of these matters most in practice?",
    (
        search(
            "{topic} in production",
            (
                (
                    "{topic} in production: lessons",
                    "https://blog.example.net/{topic_slug}-in-production",
                    "What held up outside the lab.",
                ),
            ),
            weight=2,
        ),
        extract(
            ("https://blog.example.net/{topic_slug}-in-production",),
            "# In production\n\nWhat held up outside the lab, and what did not.",
        ),
    ),
    "In practice the first one matters most; the reasons are above.",
    weight=3,
)
_DOCS = "# Overview\n\nWhat it is, what it is for, how it is run, and its known limits."

TASKS: tuple[Task, ...] = (
    Task(
        Request(
            "What are the main differences between {a} and {b}? Give sources.",
            (
                search(
                    "{a} vs {b}",
                    (
                        (
                            "{a} vs {b}: an honest comparison",
                            "https://blog.example.net/{pair_slug}",
                            "Where each one fits, with benchmarks.",
                        ),
                        ("{a} documentation", "{a_doc}", "The official documentation."),
                        ("{b} documentation", "{b_doc}", "The official documentation."),
                    ),
                    weight=3,
                ),
                extract(("{a_doc}", "{b_doc}"), _DOCS, weight=2),
                browse("{a_doc}", "{a} documentation"),
                browse("{b_doc}", "{b} documentation"),
            ),
            "The comparison is in the table above, with a source for each row.",
        ),
        (
            Request(
                "Which would you pick for a small team?",
                (
                    search(
                        "{a} vs {b} small team operations",
                        (
                            (
                                "Running {a} and {b} with a small team",
                                "https://blog.example.net/{pair_slug}-ops",
                                "What each costs to run.",
                            ),
                        ),
                    ),
                    extract(
                        ("https://blog.example.net/{pair_slug}-ops",),
                        "# Operations\n\nBackups, upgrades and monitoring, compared.",
                    ),
                ),
                "For a small team: the one with less to operate; the reasons are above.",
                weight=3,
            ),
            Request(
                "Save the comparison to notes/{pair_slug}.md.",
                (
                    write(
                        "notes/{pair_slug}.md",
                        "# {a} vs {b}\n\n| | {a} | {b} |\n|---|---|---|\n\nSources: {a_doc}, {b_doc}\n",
                    ),
                ),
                "Saved to notes/{pair_slug}.md.",
            ),
            _REMEMBER_SOURCES,
            _BENCHMARK,
        ),
        ("pair",),
    ),
    Task(
        Request(
            "Research the latest {topic} developments and summarise what changed this year.",
            (
                search(
                    "{topic} 2026",
                    (
                        (
                            "{topic}: what changed in 2026",
                            "https://blog.example.net/{topic_slug}-2026",
                            "A review of the year.",
                        ),
                        ("{topic}: a survey", "{paper}", "The reference paper."),
                    ),
                    weight=3,
                ),
                extract(
                    ("{paper}",),
                    "Abstract\n\nWe survey {topic}: methods, results and open problems.",
                    weight=2,
                ),
                browse("https://blog.example.net/{topic_slug}-2026", "{topic}: what changed in 2026"),
            ),
            "The main changes this year are summarised above, each with its source.",
        ),
        (
            Request(
                "Save a summary to notes/{topic_slug}.md.",
                (
                    write(
                        "notes/{topic_slug}.md",
                        "# {topic}\n\n- three sources, summarised below\n\nSee {paper}.\n",
                    ),
                ),
                "Saved to notes/{topic_slug}.md.",
            ),
            _REMEMBER_SOURCES,
            _IN_PRACTICE,
        ),
        ("topic",),
    ),
    Task(
        Request(
            "Find three papers on {topic} published since 2024 and summarise them.",
            (
                search(
                    "{topic} paper 2024 2025 arxiv",
                    (
                        (
                            "{topic} - arXiv search",
                            "https://arxiv.org/a/search?query={topic_slug}",
                            "Recent papers.",
                        ),
                        ("{topic}", "{paper}", "The most cited recent paper."),
                    ),
                    weight=3,
                ),
                browse("https://arxiv.org/a/search?query={topic_slug}", "Search results: {topic}"),
                extract(
                    ("{paper}",),
                    "Abstract\n\nWe study {topic} and report results on three benchmarks.",
                    weight=2,
                ),
            ),
            "Three papers are summarised above, newest first.",
        ),
        (
            Request(
                "Save a summary to notes/{topic_slug}.md.",
                (write("notes/{topic_slug}.md", "# {topic}: three papers\n\n1. {paper}\n"),),
                "Saved to notes/{topic_slug}.md.",
            ),
            _IN_PRACTICE,
        ),
        ("topic",),
    ),
    Task(
        Request(
            "Compare {a} and {b} for a small team: cost, ops burden, ecosystem.",
            (
                search(
                    "{a} managed hosting pricing",
                    (
                        (
                            "{a} hosting prices",
                            "https://blog.example.net/{pair_slug}-pricing",
                            "Managed offers compared.",
                        ),
                    ),
                    weight=2,
                ),
                search(
                    "{b} managed hosting pricing",
                    (
                        (
                            "{b} hosting prices",
                            "https://blog.example.net/{pair_slug}-pricing",
                            "Managed offers compared.",
                        ),
                    ),
                    weight=2,
                ),
                extract(("{a_doc}", "{b_doc}"), _DOCS, weight=2),
                browse("https://blog.example.net/{pair_slug}-pricing", "{a} and {b}: what they cost to run"),
            ),
            "The comparison for a small team is in the table above.",
        ),
        (
            Request(
                "Save the comparison to notes/{pair_slug}.md.",
                (
                    write(
                        "notes/{pair_slug}.md",
                        "# {a} vs {b} for a small team\n\n| | cost | ops | ecosystem |\n|---|---|---|---|\n",
                    ),
                ),
                "Saved to notes/{pair_slug}.md.",
            ),
            _REMEMBER_SOURCES,
            _BENCHMARK,
        ),
        ("pair",),
    ),
    Task(
        Request(
            "What's the current recommended way to {howto}? Check the official docs.",
            (
                search(
                    "how to {howto} official documentation",
                    (("The official guide", "{howto_doc}", "The maintainers' recommendation."),),
                    weight=2,
                ),
                extract(
                    ("{howto_doc}",),
                    "# Guide\n\nThe recommended way, step by step, and what to avoid.",
                    weight=2,
                ),
                browse("{howto_doc}", "The official guide"),
            ),
            "The docs' recommended way is summarised above, with the link.",
        ),
        (
            _REMEMBER_SOURCES,
            Request(
                "Does that differ on older versions?",
                (
                    search(
                        "{howto} older versions",
                        (
                            (
                                "Older versions: what changed",
                                "{howto_doc}",
                                "The guide's notes on earlier releases.",
                            ),
                        ),
                        weight=2,
                    ),
                    browse("{howto_doc}", "The official guide"),
                ),
                "Older versions differ in details only; the guide notes them.",
                weight=3,
            ),
        ),
        ("howto",),
    ),
)
