#!/usr/bin/env python3
"""The a2pg image's health check, ``a2pg-healthcheck [URL]``: exit 0 healthy, 1 not.

With a URL (the argument, else ``A2PG_HEALTH_URL``), a GET of it must answer 2xx within
five seconds: a worker's ``/metrics`` (``a2pg worker --metrics-port``) or the
dashboard's overview, with the dashboard's credentials from the container's environment
(``A2PG_DASHBOARD_TOKEN``, else ``A2PG_DASHBOARD_BASIC``). Without a URL it runs
``a2pg check``: the database reachable and migrated, as this container's role sees it.

Standard library only: it runs in the image, beside a2pg, and in the tests.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import urllib.error
import urllib.request

TIMEOUT = 5.0
URL_ENV = "A2PG_HEALTH_URL"


def credentials() -> str | None:
    """The Authorization header the dashboard asks of this container's clients, if any."""
    token = os.environ.get("A2PG_DASHBOARD_TOKEN")
    if token:
        return f"Bearer {token}"
    basic = os.environ.get("A2PG_DASHBOARD_BASIC")
    if basic:
        return "Basic " + base64.b64encode(basic.encode()).decode("ascii")
    return None


def probe(url: str) -> int:
    request = urllib.request.Request(url)
    header = credentials()
    if header is not None:
        request.add_header("Authorization", header)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, OSError) as exc:
        print(f"a2pg-healthcheck: {url}: {getattr(exc, 'reason', exc)}", file=sys.stderr)
        return 1
    if 200 <= status < 300:
        return 0
    print(f"a2pg-healthcheck: {url}: HTTP {status}", file=sys.stderr)
    return 1


def main(argv: list[str]) -> int:
    url = argv[0] if argv else os.environ.get(URL_ENV)
    if url:
        return probe(url)
    # Docker reads 0 as healthy and 1 as not; `a2pg check` also exits 2, 3 or 4.
    return 0 if subprocess.run(["a2pg", "check"], check=False).returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
