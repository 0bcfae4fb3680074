"""Settings from the environment (docs/CONTRACT.md section 8), checked before any session exists."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from host.inspection import forbid_inspection
from kernel.errors import ConfigError
from kernel.store.redact import environment_secrets

JEV_CONTEXT_LIMIT = 28000
OFFLOAD_POLICIES = ("deterministic", "off")
# Every model key: each worker environment drops the ones that are not its own.
MODEL_KEYS = ("TYPESAFE_API_KEY", "FLASH_API_KEY", "DEEPSEEK_API_KEY")


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number of bytes, got {raw!r}") from None
    if value <= 0:
        raise ConfigError(f"{name} must be positive, got {value}")
    return value


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds, got {raw!r}") from None
    if not 0.0 < value < float("inf"):  # NaN fails this too
        raise ConfigError(f"{name} must be a positive, finite number of seconds, got {raw!r}")
    return value


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if not 0.0 <= value <= 1.0:
        raise ConfigError(f"{name} must be between 0 and 1, got {value}")
    return value


@dataclass(frozen=True)
class Settings:
    """Everything jmp reads from the environment. Keys stay out of repr and logs."""

    typesafe_api_key: str = field(default="", repr=False)
    typesafe_base_url: str = "https://api.typesafe.ai"
    jev_model: str = "jev-latest"
    flash_api_key: str = field(default="", repr=False)
    flash_api_key_name: str = "FLASH_API_KEY"
    flash_base_url: str = "https://api.deepseek.com"
    flash_model: str = "deepseek-v4-flash"
    jev_context_bytes: int = 24000
    flash_context_bytes: int = 96000
    route_floor: float = 0.35
    argument_offload: str = "deterministic"
    # Output and time bounds (issue 9): what a model or a command may produce before it is cut.
    flash_answer_chars: int = 200_000
    flash_arguments_chars: int = 1_000_000
    bash_timeout_s: float = 300.0
    bash_output_bytes: int = 5_000_000
    # Every key variable that was set, used or not (DEEPSEEK_API_KEY beside FLASH_API_KEY).
    other_secrets: tuple[str, ...] = field(default=(), repr=False)

    @classmethod
    def environment(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read and validate settings; keys are checked later, only when a model is needed.
        The process holds keys from here on (an embedding program too): it turns non-dumpable."""
        forbid_inspection()
        env = os.environ if env is None else env
        flash_key_name = "FLASH_API_KEY" if env.get("FLASH_API_KEY") else "DEEPSEEK_API_KEY"
        settings = cls(
            typesafe_api_key=env.get("TYPESAFE_API_KEY", ""),
            typesafe_base_url=env.get("TYPESAFE_BASE_URL") or cls.typesafe_base_url,
            jev_model=env.get("JEV_MODEL") or cls.jev_model,
            flash_api_key=env.get(flash_key_name, ""),
            flash_api_key_name=flash_key_name,
            flash_base_url=env.get("FLASH_BASE_URL") or cls.flash_base_url,
            flash_model=env.get("FLASH_MODEL") or cls.flash_model,
            jev_context_bytes=_int(env, "JEV_CONTEXT_BYTES", 24000),
            flash_context_bytes=_int(env, "FLASH_CONTEXT_BYTES", 96000),
            route_floor=_float(env, "JEV_ROUTE_FLOOR", 0.35),
            argument_offload=(env.get("JEV_ARGUMENT_OFFLOAD") or "deterministic").strip(),
            flash_answer_chars=_int(env, "JMP_FLASH_ANSWER_CHARS", cls.flash_answer_chars),
            flash_arguments_chars=_int(env, "JMP_FLASH_ARGUMENTS_CHARS", cls.flash_arguments_chars),
            **bash_limits(env),
            other_secrets=environment_secrets(env),
        )
        tool_ready_s(env)  # checked at start-up, read where the tool worker is started
        file_tool_s(env)  # likewise, read where a file tool's call is made
        heartbeat_s(env)  # likewise, read where a tool call is waited for
        settings.validate()
        return settings

    def validate(self) -> None:
        """Refuse values jmp cannot honour, naming the variable."""
        if self.jev_context_bytes > JEV_CONTEXT_LIMIT:
            raise ConfigError(
                f"JEV_CONTEXT_BYTES={self.jev_context_bytes} is above the limit of "
                f"{JEV_CONTEXT_LIMIT} bytes"
            )
        if self.argument_offload == "bounded":
            raise ConfigError(
                "JEV_ARGUMENT_OFFLOAD=bounded is not supported: use 'deterministic' (the "
                "default) or 'off'"
            )
        if self.argument_offload not in OFFLOAD_POLICIES:
            raise ConfigError(
                f"JEV_ARGUMENT_OFFLOAD={self.argument_offload!r} is not one of "
                "'deterministic', 'off'"
            )

    def require_keys(self) -> None:
        """A missing key is a clear error naming every missing variable (before any session)."""
        missing = []
        if not self.typesafe_api_key:
            missing.append("TYPESAFE_API_KEY (the router, Jev)")
        if not self.flash_api_key:
            missing.append("FLASH_API_KEY or DEEPSEEK_API_KEY (the generator, Flash)")
        if missing:  # (the key file: kernel/config/keys.py, which the front ends have read)
            hint = " (or store the keys with `jmp --setup`)"
            raise ConfigError("not set: " + "; ".join(missing) + hint)

    @property
    def secrets(self) -> tuple[str, ...]:
        """Known credentials, for the redactor: every key variable that is set."""
        keys = (self.typesafe_api_key, self.flash_api_key, *self.other_secrets)
        return tuple(dict.fromkeys(s for s in keys if s))

    def router_env(self) -> dict[str, str]:
        """Environment for the router worker (its key travels only here)."""
        return {
            "TYPESAFE_API_KEY": self.typesafe_api_key,
            "TYPESAFE_BASE_URL": self.typesafe_base_url,
            "JEV_MODEL": self.jev_model,
        }

    def generator_env(self) -> dict[str, str]:
        """Environment for the generator worker."""
        return {
            "FLASH_API_KEY": self.flash_api_key,
            "FLASH_BASE_URL": self.flash_base_url,
            "FLASH_MODEL": self.flash_model,
            "JMP_FLASH_ANSWER_CHARS": str(self.flash_answer_chars),
            "JMP_FLASH_ARGUMENTS_CHARS": str(self.flash_arguments_chars),
        }


def tool_ready_s(env: Mapping[str, str] | None = None) -> float:
    """JMP_TOOL_READY_S: how long the kernel waits for a starting tool worker's handshake
    (kernel/supervision/restart.py TOOL_READY_S by default); ConfigError names a bad value."""
    from kernel.supervision.restart import TOOL_READY_S  # the one timeout table

    return _seconds(os.environ if env is None else env, "JMP_TOOL_READY_S", TOOL_READY_S)


def file_tool_s(env: Mapping[str, str] | None = None) -> float:
    """JMP_FILE_TOOL_TIMEOUT_S: how long the kernel waits for a file tool's answer before it
    stops the call (kernel/supervision/restart.py FILE_TOOL_S by default); ConfigError names a
    bad value."""
    from kernel.supervision.restart import FILE_TOOL_S  # the one timeout table

    return _seconds(os.environ if env is None else env, "JMP_FILE_TOOL_TIMEOUT_S", FILE_TOOL_S)


HEARTBEAT_S = 10.0  # a running tool's `tool_progress` interval (issue 34: at least every 10 s)


def heartbeat_s(env: Mapping[str, str] | None = None) -> float:
    """JMP_HEARTBEAT_S: how often a running tool call's transient `tool_progress` heartbeat is
    emitted (10 s by default, at most 10); ConfigError names a bad value."""
    value = _seconds(os.environ if env is None else env, "JMP_HEARTBEAT_S", HEARTBEAT_S)
    if value > HEARTBEAT_S:
        raise ConfigError(f"JMP_HEARTBEAT_S={value:g} is above {HEARTBEAT_S:g} seconds")
    return value


def bash_limits(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The shell's bounds: {bash_timeout_s, bash_output_bytes}; ConfigError names a bad one."""
    env = os.environ if env is None else env
    return {
        "bash_timeout_s": _seconds(env, "JMP_BASH_TIMEOUT_S", Settings.bash_timeout_s),
        "bash_output_bytes": _int(env, "JMP_BASH_OUTPUT_BYTES", Settings.bash_output_bytes),
    }
