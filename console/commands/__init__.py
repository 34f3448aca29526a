"""Headless subcommands of ``seat-console``. Each module defines ``register(subparsers)``,
which adds its parser and sets ``func`` to a callable ``(args, loaded_profile) -> int``."""
