"""`jmp --setup`: ask for the model keys in a terminal, check each with its service, store them.

The ACP `terminal` auth method runs this (acp_server/auth.py). Each key is read with getpass
(never echoed), checked by one authenticated GET of the service's model list (TYPESAFE_BASE_URL
/v1/models, FLASH_BASE_URL/models: no model call, nothing billed), and both are stored at once
in the key file (kernel/config/keys.py: 0600 in a 0700 directory, atomic, fsynced). A key the
service refuses is asked again; a service that cannot be reached is said so and its key stored
unchecked. Nothing here prints or logs a key. Exit 0 once stored, 2 otherwise.
"""

from __future__ import annotations

import getpass
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from kernel.config import keys
from kernel.errors import ConfigError

CHECK_TIMEOUT_S = 10.0
TRIES = 3


@dataclass(frozen=True)
class Service:
    variable: str  # the key variable (kernel/config/keys.py STORED)
    label: str  # what the person is asked for
    url_variable: str
    default_url: str
    models_path: str  # appended to the base URL


SERVICES = (
    Service(keys.JEV, "Jev key (TYPESAFE_API_KEY, the router)", "TYPESAFE_BASE_URL",
            "https://api.typesafe.ai", "/v1/models"),
    Service(keys.FLASH, "Flash key (FLASH_API_KEY; a DeepSeek key works, the generator)",
            "FLASH_BASE_URL", "https://api.deepseek.com", "/models"),
)  # fmt: skip


def check(service: Service, key: str, env: dict[str, str] | None = None) -> tuple[bool, str]:
    """(usable, what to tell the person): refused keys are not usable; an unreachable service
    leaves the key usable, unchecked."""
    import httpx

    env = dict(os.environ) if env is None else env
    base = (env.get(service.url_variable) or service.default_url).rstrip("/")
    url = base + service.models_path
    try:
        answer = httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=CHECK_TIMEOUT_S)
    except httpx.HTTPError as exc:
        reason = type(exc).__name__
        return True, f"could not reach {base} ({reason}): stored unchecked"
    if answer.status_code in (401, 403):
        return False, f"{base} refused this key (HTTP {answer.status_code})"
    if answer.is_success:
        return True, f"{base} accepted it"
    return True, f"{base} answered HTTP {answer.status_code}: stored unchecked"


Ask = Callable[[str], str]


def ask_key(service: Service, stored: str, ask: Ask, out: TextIO) -> str | None:
    """The key to store for SERVICE (the stored one when the person just presses Enter), or
    None after TRIES refused or empty answers."""
    keep = " [Enter keeps the stored one]" if stored else ""
    for _ in range(TRIES):
        given = ask(f"{service.label}{keep}: ").strip()
        if not given and stored:
            return stored
        if not given:
            out.write("  a key is needed (or press Ctrl+C to stop)\n")
            continue
        if not given.isprintable():
            out.write("  that is not a key (it holds control characters)\n")
            continue
        usable, said = check(service, given)
        out.write(f"  {said}\n")
        if usable:
            return given
    return None


def run(ask: Ask = getpass.getpass, out: TextIO | None = None) -> int:
    """The interactive setup; returns the exit status."""
    out = sys.stdout if out is None else out
    path = keys.key_file()
    out.write(f"jmp setup: the model keys, stored in {path} (readable by you alone)\n")
    out.write("Keys are not shown as you type. Environment variables still win over the file.\n")
    try:
        stored = keys.read(path)
    except ConfigError as exc:
        out.write(f"  {exc}: it will be written again\n")
        stored = {}
    chosen: dict[str, str] = {}
    try:
        for service in SERVICES:
            key = ask_key(service, stored.get(service.variable, ""), ask, out)
            if key is None:
                out.write("jmp setup: nothing was stored\n")
                return 2
            chosen[service.variable] = key
    except (KeyboardInterrupt, EOFError):
        out.write("\njmp setup: stopped; nothing was stored\n")
        return 2
    keys.write(chosen, path)
    out.write(f"jmp setup: stored in {path}; jmp, jmp --acp and jev-harness use it now\n")
    out.flush()
    return 0
