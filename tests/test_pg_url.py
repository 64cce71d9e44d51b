"""What a Postgres --db shows in messages (review L9): no password, and none of libpq's
other secret-bearing parameters (sslpassword, passfile, the SCRAM keys, the OAuth client
secret, the client key's file), in the URL form and in libpq's key=value form. No server
needed: this is the text alone."""

from __future__ import annotations

import pytest

from brainbot.store.pg.schema import SECRET_KEYS, public_url
from brainbot.store.target import public_target

SECRETS = {"password": "pw-Horse-1", "sslpassword": "ssl-Battery-2", "passfile": "/home/me/.pw3",
           "sslkey": "/home/me/client-4.key", "oauth_client_secret": "oauth-Staple-5",
           "scram_client_key": "c2NyYW0tNg", "scram_server_key": "c2NyYW0tNw",
           "sslkeylogfile": "/tmp/keys-8.log"}


def _leaks(text: str) -> list[str]:
    return [v for v in (*SECRETS.values(), "auth-Pw-0") if v in text]


def test_a_url_loses_every_secret_and_keeps_the_rest():
    query = "&".join(f"{k}={v}" for k, v in SECRETS.items())
    url = f"postgresql://me:auth-Pw-0@db.example:5433/notes?sslmode=require&{query}&PASSWORD=x9"
    shown = public_url(url)
    assert _leaks(shown) == [] and "x9" not in shown
    assert shown == "postgresql://me@db.example:5433/notes?sslmode=require"
    assert public_target(url) == shown


def test_a_key_value_conninfo_loses_every_secret():
    pytest.importorskip("psycopg")
    conninfo = ("host=db.example dbname=notes user=me " + " ".join(
        f"{k}='{v}'" for k, v in SECRETS.items()) + " password='auth-Pw-0 with space'")
    shown = public_url(conninfo)
    assert _leaks(shown) == [] and "with space" not in shown
    assert all(part in shown for part in ("host=db.example", "dbname=notes", "user=me"))


def test_every_secret_libpq_masks_is_dropped():
    """libpq marks its password-like keywords with dispchar '*' (debug-only ones 'D'):
    a libpq that adds one makes this fail rather than leak it."""
    pq = pytest.importorskip("psycopg.pq")
    masked = {o.keyword.decode() for o in pq.Conninfo.get_defaults()
              if o.dispchar and o.dispchar.decode() == "*"}
    scram = {o.keyword.decode() for o in pq.Conninfo.get_defaults()
             if o.keyword.decode().startswith("scram_")}
    assert {"password", "sslpassword"} <= masked
    assert masked | scram <= SECRET_KEYS


def test_a_statement_past_a_limit_is_not_a_lost_server():
    """psycopg raises the btree limit (54000) as an OperationalError: it was reported as
    "lost the database server … check that it is running"."""
    errors = pytest.importorskip("psycopg.errors")
    from brainbot.store.pg.schema import translate

    limit = translate(errors.ProgramLimitExceeded("index row size 3048 exceeds btree version "
                                                  "4 maximum 2704"), "postgresql://h/db")
    assert "lost" not in str(limit) and "exceeds btree" in str(limit)
    gone = translate(errors.AdminShutdown("terminating connection"), "postgresql://h/db")
    assert "lost the database server" in str(gone)
