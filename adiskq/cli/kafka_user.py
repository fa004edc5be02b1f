"""``adiskq kafka-user`` adds a user to the Kafka gateway's SASL credentials file."""

from __future__ import annotations

import sys

import click

__all__ = ["kafka_user"]


@click.command("kafka-user")
@click.argument("file", type=click.Path(dir_okay=False, path_type=str))
@click.argument("name")
@click.option("--password-stdin", is_flag=True, help="Read the password from the first line of standard input.")
@click.option(
    "--iterations",
    type=click.IntRange(4096),
    default=8192,
    show_default=True,
    help="PBKDF2 iterations of the SCRAM keys (Kafka's minimum is 4096).",
)
def kafka_user(file: str, name: str, password_stdin: bool, iterations: int) -> None:
    """Add or replace a SASL user of the Kafka gateway (`adiskq serve --sasl-credentials FILE`).

    The file keeps SCRAM-SHA-256 and SCRAM-SHA-512 salted keys, never the password; PLAIN logins are
    checked against the same keys. It is created (mode 0600) if missing.

    \b
    Examples:
      adiskq kafka-user users.json alice                      asks for the password twice
      echo "$PASSWORD" | adiskq kafka-user users.json ci --password-stdin
    """
    from ..kafka.credentials import save_user

    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = click.prompt("password", hide_input=True, confirmation_prompt=True)
    if not password:
        raise click.BadParameter("the password is empty: give one", param_hint="password")
    try:
        save_user(file, name, password, iterations=iterations)
    except ValueError as error:
        raise click.ClickException(f"{error}; fix or move the file, then run this again") from None
    click.echo(f"user {name!r} saved in {file} (SCRAM-SHA-256, SCRAM-SHA-512; PLAIN checked against them)")
