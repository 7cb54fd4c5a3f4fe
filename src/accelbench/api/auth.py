"""Authentication of API callers: the service token from the settings and API keys stored hashed.

- Mutating endpoints always need a bearer token; read endpoints need one too unless the operator opts in to
  public reads with ``ACCELBENCH_API_READ_AUTH=false`` (secrets stay masked in what is read).
- A token is either ``ACCELBENCH_API_TOKEN`` (compared in constant time; it acts as an admin) or an API key
  made by ``accelbench apikey create NAME --role admin|user|read-only``. A read-only key reads; a user key also
  queues runs and cancels or deletes its own; an admin key acts on every run and changes the configuration. A key looks like ``abk_<8 hex>_<43 url-safe chars>``: the first twelve
  characters are its lookup prefix, the whole key is stored only as a salted scrypt hash, and the plain key is
  shown once, when it is made.
- The pages sign in by storing the token in an HttpOnly, SameSite=Strict cookie. A cookie alone is never
  enough for a mutating request: it must also carry ``X-Requested-With`` (a header a cross-site form cannot
  send), so a forged cross-site request is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Literal

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from accelbench.errors import AuthError, ForbiddenError, TooManyAttempts, UserInputError
from accelbench.services import api_keys
from accelbench.services.session import Store
from accelbench.settings import Settings

KEY_PREFIX = "abk_"
PREFIX_LEN = len(KEY_PREFIX) + 8
COOKIE_NAME = "accelbench_token"
CSRF_HEADER = "X-Requested-With"

# scrypt cost: 16 MiB of memory and tens of milliseconds per check, paid once per key and process thanks to
# the verified-key cache below; brute-forcing a stolen hash of a 256-bit random key is hopeless anyway.
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**14, 8, 1
_TOUCH_EVERY_S = 60.0


Role = Literal["admin", "user", "read-only"]
#: what each role may do, in the order of what they allow
ROLES: dict[str, str] = {
    "admin": "everything: every run (cancel, delete), the configuration",
    "user": "read, queue runs, cancel and delete its own runs",
    "read-only": "read",
}


@dataclass(frozen=True)
class Principal:
    """Who made a request (for audit lines and ownership); ``anonymous`` only on open read endpoints."""

    name: str
    kind: Literal["token", "apikey", "anonymous"]
    role: Role = "read-only"
    key_id: int | None = None  # the API key's id: the runs it submitted are its own

    @property
    def actor(self) -> str:
        return self.name if self.kind != "apikey" else f"apikey:{self.name}"

    def owns(self, owner_key_id: int | None) -> bool:
        """May act on a run submitted by ``owner_key_id``: an admin on every run, a key on its own."""
        return self.role == "admin" or (self.key_id is not None and self.key_id == owner_key_id)


ANONYMOUS = Principal("anonymous", "anonymous")
SERVICE_TOKEN = Principal("api-token", "token", role="admin")


def hash_api_key(key: str, *, salt: bytes | None = None) -> str:
    """Salted scrypt hash, self-describing: ``scrypt$N$r$p$salt$hash`` (base64)."""
    salt = salt or secrets.token_bytes(16)
    digest = hashlib.scrypt(key.encode(), salt=salt, n=_SCRYPT_N, r=_SCRYPT_R, p=_SCRYPT_P, dklen=32)
    b64 = base64.b64encode
    return f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}${b64(salt).decode()}${b64(digest).decode()}"


_DUMMY_HASH: list[str] = []  # a stored-hash stand-in, made once: an unknown prefix costs one scrypt as well


def _dummy_hash() -> str:
    if not _DUMMY_HASH:
        _DUMMY_HASH.append(hash_api_key(secrets.token_urlsafe(32)))
    return _DUMMY_HASH[0]


#: refused credentials one client may send in FAILED_WINDOW_S seconds before it gets 429 without a check
FAILED_LIMIT = 20
FAILED_WINDOW_S = 60.0


class FailedAuthLimiter:
    """Counts refused credentials per client; past ``FAILED_LIMIT`` in ``FAILED_WINDOW_S`` seconds the client
    is answered 429 (with Retry-After) before any scrypt runs, so guessing keys is slow and cannot keep a core
    busy. A success does not reset the count (a valid key does not license guessing others)."""

    def __init__(self, limit: int = FAILED_LIMIT, window_s: float = FAILED_WINDOW_S) -> None:
        self.limit, self.window_s = limit, window_s
        self._failures: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, client: str, now: float) -> list[float]:
        times = [t for t in self._failures.get(client, []) if now - t < self.window_s]
        if times:
            self._failures[client] = times
        else:
            self._failures.pop(client, None)
        return times

    def check(self, client: str) -> None:

        now = time.monotonic()
        with self._lock:
            times = self._recent(client, now)
            if len(times) >= self.limit:
                wait = int(self.window_s - (now - times[0])) + 1
                raise TooManyAttempts(
                    f"Too many refused credentials from this client ({len(times)} in {self.window_s:.0f} s).",
                    hint=f"Wait {wait} s, then send a valid token.",
                    retry_after_s=wait,
                )

    def failed(self, client: str) -> None:
        now = time.monotonic()
        with self._lock:
            times = self._recent(client, now)
            times.append(now)
            self._failures[client] = times
            if len(self._failures) > 10_000:  # many clients: keep memory bounded, forget the oldest
                for key in list(self._failures)[:1_000]:
                    del self._failures[key]


def verify_api_key(key: str, stored: str) -> bool:
    try:
        algo, n, r, p, salt_b64, hash_b64 = stored.split("$")
        if algo != "scrypt":
            return False
        salt, expected = base64.b64decode(salt_b64), base64.b64decode(hash_b64)
        digest = hashlib.scrypt(
            key.encode(), salt=salt, n=int(n), r=int(r), p=int(p), dklen=len(expected), maxmem=2**26
        )
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(digest, expected)


def new_api_key() -> str:
    return f"{KEY_PREFIX}{secrets.token_hex(4)}_{secrets.token_urlsafe(32)}"


def key_prefix(key: str) -> str | None:
    if not key.startswith(KEY_PREFIX) or len(key) < PREFIX_LEN + 2 or key[PREFIX_LEN] != "_":
        return None
    return key[:PREFIX_LEN]


def create_api_key(store: Store, name: str, role: str = "user") -> str:
    """Make and store a new key with ``role`` (admin, user or read-only); returns the plain key, which is never
    retrievable again."""
    name = name.strip()
    if not name or len(name) > 100:
        raise UserInputError("An API key needs a name of 1 to 100 characters, e.g. `ci` or `alice`.")
    if role not in ROLES:
        raise UserInputError(
            f"Unknown API key role {role!r}.",
            hint="Choose one of: " + "; ".join(f"{r} ({what})" for r, what in ROLES.items()) + ".",
        )
    key = new_api_key()
    prefix = key_prefix(key)
    assert prefix is not None
    api_keys.add_key(store, name, prefix, hash_api_key(key), role)
    return key


class TokenVerifier:
    """Checks bearer tokens against the settings token and the stored keys.

    A key that passed scrypt once is remembered by its SHA-256 for this process (the key itself is not kept),
    but the store is still asked on every request whether it exists and is not revoked, so revoking a key
    takes effect immediately.
    """

    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.store = store
        self._verified: dict[str, tuple[int, str]] = {}  # sha256(key) -> (id, stored hash)
        self._touched: dict[int, float] = {}
        self._lock = threading.Lock()
        self.limiter = FailedAuthLimiter()

    def configured(self) -> bool:
        if self.settings.api_token:
            return True
        return api_keys.any_live_key(self.store)

    def verify(self, token: str) -> Principal | None:
        token = token.strip()
        if not token:
            return None
        expected = self.settings.api_token
        if expected and hmac.compare_digest(token.encode(), expected.encode()):
            return SERVICE_TOKEN
        prefix = key_prefix(token)
        if prefix is None:
            return None
        candidates = api_keys.keys_with_prefix(self.store, prefix)
        if not candidates:
            verify_api_key(token, _dummy_hash())  # as long as a wrong secret: the prefix is not an oracle
            return None
        fingerprint = hashlib.sha256(token.encode()).hexdigest()
        with self._lock:
            cached = self._verified.get(fingerprint)
        for key_id, stored, name, role in candidates:  # name and role as stored now, never cached
            if cached == (key_id, stored) or (cached is None and verify_api_key(token, stored)):
                with self._lock:
                    self._verified[fingerprint] = (key_id, stored)
                self._touch(key_id)
                return Principal(name, "apikey", role=_role(role), key_id=key_id)
        return None

    def _touch(self, key_id: int) -> None:
        now = time.monotonic()
        with self._lock:
            last = self._touched.get(key_id)
            if last is not None and now - last < _TOUCH_EVERY_S:
                return
            self._touched[key_id] = now
        api_keys.touch_key(self.store, key_id)


def _role(stored: str) -> Role:
    return stored if stored in ("admin", "user") else "read-only"  # type: ignore[return-value]


_bearer = HTTPBearer(
    auto_error=False,
    description="ACCELBENCH_API_TOKEN or an API key from `accelbench apikey create NAME`.",
)


def _verifier(request: Request) -> TokenVerifier:
    verifier: TokenVerifier = request.app.state.verifier
    return verifier


def _no_token_error(verifier: TokenVerifier, *, write: bool) -> AuthError:
    what = "This request changes data and needs" if write else "Reading needs"
    if not verifier.configured():
        return AuthError(
            f"{what} a bearer token, and the server has none configured.",
            hint="Set ACCELBENCH_API_TOKEN for the server, or create a key with "
            "`accelbench apikey create NAME`; then send `Authorization: Bearer <token>`.",
        )
    return AuthError(
        f"{what} a bearer token: send `Authorization: Bearer <token>`.",
        hint="Use ACCELBENCH_API_TOKEN or an API key from `accelbench apikey create NAME`; "
        "in the web pages, sign in at /login.",
    )


def authenticate(
    request: Request, credentials: HTTPAuthorizationCredentials | None, *, write: bool
) -> Principal:
    verifier = _verifier(request)
    client = request.client.host if request.client else "unknown"
    if credentials is not None:
        verifier.limiter.check(client)
        principal = verifier.verify(credentials.credentials)
        if principal is None:
            verifier.limiter.failed(client)
            raise AuthError(
                "The bearer token was not accepted (wrong, revoked or malformed).",
                hint="Check the token, or create a new key with `accelbench apikey create NAME`.",
            )
        return principal
    cookie = request.cookies.get(COOKIE_NAME)
    if cookie:
        if write and not request.headers.get(CSRF_HEADER):
            raise AuthError(
                f"A signed-in page request that changes data must carry the {CSRF_HEADER} header.",
                hint="Scripts should send the token as `Authorization: Bearer <token>` instead.",
            )
        verifier.limiter.check(client)
        principal = verifier.verify(cookie)
        if principal is None:
            verifier.limiter.failed(client)
            raise AuthError("Your sign-in is no longer valid.", hint="Sign in again at /login.")
        return principal
    raise _no_token_error(verifier, write=write)


def require_write(
    request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)
) -> Principal:
    """Dependency of every mutating endpoint: a token whose role may change data (not read-only)."""
    principal = authenticate(request, credentials, write=True)
    if principal.role == "read-only":
        raise ForbiddenError(
            f"The API key {principal.name!r} is read-only: it may read, not change anything.",
            hint="Use a key with the user or admin role (`accelbench apikey create NAME --role user`).",
        )
    return principal


def require_admin(
    request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)
) -> Principal:
    """Dependency of endpoints that change the service for everyone (the configuration)."""
    principal = require_write(request, credentials)
    if principal.role != "admin":
        raise ForbiddenError(
            f"Only an admin key may do this; {principal.name!r} is a {principal.role} key.",
            hint="Use ACCELBENCH_API_TOKEN or a key made with `accelbench apikey create NAME --role admin`.",
        )
    return principal


def require_run_owner(principal: Principal, owner_key_id: int | None, run_id: str, action: str) -> None:
    """Refuse ``action`` (cancel, delete) on a run that is not the caller's, unless the caller is an admin."""
    if not principal.owns(owner_key_id):
        raise ForbiddenError(
            f"Run {run_id} is not yours to {action}: only the key that submitted it or an admin key may.",
            hint="Ask its owner, or use an admin key (ACCELBENCH_API_TOKEN or `--role admin`).",
        )


def require_read(
    request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)
) -> Principal:
    """Dependency of every read endpoint: a token unless the operator opened reads (``api_read_auth`` false);
    a given token is checked either way."""
    settings: Settings = request.app.state.settings
    if not settings.api_read_auth and credentials is None:
        return ANONYMOUS
    if not settings.api_read_auth and credentials is not None:
        # A wrong token on an open endpoint is still an error: silently ignoring it hides client bugs.
        return authenticate(request, credentials, write=False)
    return authenticate(request, credentials, write=False)


def page_principal(request: Request) -> Principal | None:
    """The principal of a page request from its sign-in cookie (None when not signed in)."""
    cookie = request.cookies.get(COOKIE_NAME)
    if not cookie:
        return None
    return _verifier(request).verify(cookie)
