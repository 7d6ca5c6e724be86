"""Apprise delivery URLs: check one, send to one, and show one without its secrets.

A leaf module: jobs check a URL when they are made and the scheduler delivers through it, so
neither needs the other (``delivery`` imported ``jobs`` and ``jobs`` imported ``delivery``).
apprise itself is imported only when a URL is used, since it loads every plugin on import.
"""

from __future__ import annotations

from kindling.errors import ConfigError, EndpointError

LOCAL = "local"


def check_delivery_url(url: str) -> str:
    """Return ``url`` when it is ``local`` or an Apprise URL Apprise understands.

    Raises ConfigError otherwise, so a typo is caught when the job is added, not at 3 a.m.
    """
    if url == LOCAL:
        return url
    import apprise  # lazy: apprise loads every notification plugin on import

    if not apprise.Apprise().add(url):
        raise ConfigError(f"Delivery URL {redact(url)!r} is not 'local' or an Apprise URL kindling can use.")
    return url


def deliver(url: str, *, title: str, body: str, timeout: float = 15.0) -> None:
    """Send ``body`` to an Apprise URL.

    Raises ConfigError when Apprise does not understand the URL and EndpointError when sending fails.
    """
    import apprise  # lazy: apprise loads every notification plugin on import

    notifier = apprise.Apprise()
    if not notifier.add(url):
        raise ConfigError(f"Delivery URL {redact(url)!r} is not an Apprise URL kindling can use.")
    result = notifier.notify(body=body, title=title, timeout=timeout)
    if not result:
        raise EndpointError(f"Delivery to {redact(url)} failed.", base_url=redact(url))


def redact(url: str) -> str:
    """Return a delivery URL safe to log and save: Apprise's privacy form, or only the scheme.

    Tokens sit in different places per service (Telegram's bot token is the host, Pushover's app
    token follows the ``@``), so only Apprise, which parses each service, knows what to hide.
    """
    if url == LOCAL:
        return url
    import apprise  # lazy: apprise loads every notification plugin on import

    plugin = apprise.Apprise.instantiate(url, suppress_exceptions=True)
    if plugin:
        # The query holds options, not secrets, but is long; the path is masked by Apprise.
        return str(plugin.url(privacy=True)).split("?", 1)[0]
    scheme, sep, _rest = url.partition("://")
    return f"{scheme}://..." if sep else "..."
