"""Users, groups, sign-in and tickets, as pve-access-control does them.

What is modelled (see README.md, "Users, groups and sign-in"):

- the world's `users` (pam and pve realms, password, optional TOTP secret,
  enable, expire, ACL) and `groups` (members, ACL); root@pam always exists,
  as PVE's userconfig_force_defaults adds it;
- POST /access/ticket as PVE::API2::AccessControl's create_ticket: every
  failure is 401 `authentication failure` whatever went wrong (the reason is
  only logged, here in the auth log of /_sim/state);
- the new-style (PVE 7+) second factor: a user with TOTP first gets a
  half-authenticated ticket `PVE:!tfa!{"totp"%3Atrue}:HEXTIME::SIG` with
  NeedTFA 1, and answers it with tfa-challenge = that ticket and password =
  `totp:CODE`; RFC 6238 (SHA-1, 6 digits, 30 s) with one step either side,
  a code of a step not later than the last one used is refused (proxmox-tfa's
  last_count), 8 TOTP failures in a row lock TOTP (proxmox-tfa's
  totp_failure_limit);
- tickets `PVE:USER:HEXTIME::SIG` valid from 5 min before to 2 h after
  their time (PVE's $auth_graceperiod and $ticket_lifetime), the CSRF
  prevention token `HEXTIME:BASE64` (PVE::Ticket's HMAC-SHA256 of
  `HEXTIME:USER`) with the same ages.

The signatures are HMACs with secrets made at start, not RSA; the ticket's
signature has the length of an RSA-2048 one (344 base64 characters).
"""

import base64
import hashlib
import hmac
import os
import re
import struct
import time
import urllib.parse

TICKET_LIFETIME = 2 * 3600  # PVE::AccessControl $ticket_lifetime
AUTH_GRACE = 5 * 60  # $auth_graceperiod: tickets from up to 5 min "in the future"
TOTP_STEP = 30
TOTP_DIGITS = 6
TOTP_FAILURE_LIMIT = 8  # proxmox-tfa totp_failure_limit()
REALMS = ("pam", "pve")  # domains.cfg of a fresh install

# PVE::Auth::Plugin
_REALM = r"[A-Za-z][A-Za-z0-9\.\-_]+"
_USER = r"[^\s:/]+"
USERID_RE = re.compile(r"^(%s)@(%s)$" % (_USER, _REALM))
REALM_RE = re.compile(r"^%s$" % _REALM)
GROUPID_RE = re.compile(r"^[A-Za-z0-9\.\-_]+$")

USER_KEYS = {"userid", "password", "totp", "enable", "expire", "firstname", "lastname", "email", "comment", "acl"}
GROUP_KEYS = {"groupid", "members", "comment", "acl"}


class AuthFailure(Exception):
    """A sign-in that fails; the message is what PVE would syslog, never
    what the client is told."""


def verify_username(userid):
    """PVE::Auth::Plugin::verify_username: (userid, ruid, realm) or
    ValueError with PVE's message."""
    userid = userid or ""
    n = len(userid)
    if n < 3:
        raise ValueError("user name '%s' is too short" % userid)
    if n > 64:
        raise ValueError("user name '%s' is too long (%d > 64)" % (userid, n))
    m = USERID_RE.match(userid)
    if not m:
        raise ValueError("value '%s' does not look like a valid user name" % userid)
    return userid, m.group(1), m.group(2)


def _b32_secret(s):
    """A TOTP secret as base32 (RFC 4648, padding optional) -> bytes."""
    t = s.strip().replace(" ", "").upper()
    if not re.match(r"^[A-Z2-7]+=*$", t):
        raise ValueError("not base32")
    t += "=" * (-len(t) % 8)
    key = base64.b32decode(t)
    if len(key) < 10:
        raise ValueError("shorter than 80 bits")
    return key


def totp_code(key, counter, digits=TOTP_DIGITS):
    """RFC 4226/6238 HOTP value of counter (SHA-1)."""
    mac = hmac.new(key, struct.pack(">Q", counter), hashlib.sha1).digest()
    off = mac[-1] & 0x0F
    v = struct.unpack(">I", mac[off : off + 4])[0] & 0x7FFFFFFF
    return "%0*d" % (digits, v % (10**digits))


def load(data, norm_acl, token_ids):
    """The world's users and groups -> (users, groups). Raises ValueError
    naming the entry."""
    users = {}
    for u in data.get("users", []):
        if not isinstance(u, dict):
            raise ValueError("world: each user must be an object, not %r" % (u,))
        uid = u.get("userid")
        if not isinstance(uid, str):
            raise ValueError("world: user %r has no 'userid'" % (u,))
        try:
            _, _, realm = verify_username(uid)
        except ValueError as e:
            raise ValueError("world: user '%s': %s" % (uid, e))
        if realm not in REALMS:
            # what PVE says when a user of a realm that is not in
            # domains.cfg signs in (PVE::AccessControl::authenticate_user)
            raise ValueError("world: user '%s': auth domain '%s' does not exist (realms: %s)" % (uid, realm, ", ".join(REALMS)))
        if uid in users:
            raise ValueError("world: user '%s' defined twice" % uid)
        extra = set(u) - USER_KEYS
        if extra:
            raise ValueError("world: user '%s': unknown key(s) %s (known: %s)" % (uid, ", ".join(sorted(extra)), ", ".join(sorted(USER_KEYS))))
        pw = u.get("password")
        if pw is not None and (not isinstance(pw, str) or pw == ""):
            raise ValueError("world: user '%s': 'password' must be a non-empty string" % uid)
        key = None
        if u.get("totp") is not None:
            if not isinstance(u["totp"], str):
                raise ValueError("world: user '%s': 'totp' must be a base32 string" % uid)
            try:
                key = _b32_secret(u["totp"])
            except (ValueError, TypeError) as e:
                raise ValueError("world: user '%s': 'totp' is not a usable base32 secret (%s)" % (uid, e))
        enable = u.get("enable", 1)
        if enable not in (0, 1, True, False):
            raise ValueError("world: user '%s': 'enable' must be 0 or 1" % uid)
        expire = u.get("expire", 0)
        if isinstance(expire, bool) or not isinstance(expire, int) or expire < 0:
            raise ValueError("world: user '%s': 'expire' must be epoch seconds >= 0 (0: never)" % uid)
        for k in ("firstname", "lastname", "email", "comment"):
            if k in u and not isinstance(u[k], str):
                raise ValueError("world: user '%s': '%s' must be a string" % (uid, k))
        users[uid] = {
            "userid": uid, "realm": realm, "password": pw, "totp_key": key, "enable": 1 if enable else 0, "expire": expire,
            "info": {k: u[k] for k in ("firstname", "lastname", "email", "comment") if u.get(k)},
            "acl": norm_acl(u.get("acl", {}), "user " + uid), "groups": set(),
            "totp_last": -1, "totp_failures": 0, "totp_locked": False,
        }
    # root@pam always exists (userconfig_force_defaults); without a
    # password in the world it cannot sign in here.  The owner of every
    # token exists too (PVE refuses a token without its user).
    implicit = ["root@pam"] + [t.split("!", 1)[0] for t in token_ids]
    for uid in implicit:
        if uid not in users:
            try:
                _, _, realm = verify_username(uid)
            except ValueError:
                continue
            users[uid] = {"userid": uid, "realm": realm, "password": None, "totp_key": None, "enable": 1, "expire": 0, "info": {}, "acl": {}, "groups": set(), "totp_last": -1, "totp_failures": 0, "totp_locked": False}
    groups = {}
    for g in data.get("groups", []):
        if not isinstance(g, dict):
            raise ValueError("world: each group must be an object, not %r" % (g,))
        gid = g.get("groupid")
        if not isinstance(gid, str):
            raise ValueError("world: group %r has no 'groupid'" % (g,))
        if not GROUPID_RE.match(gid):
            raise ValueError("world: group '%s': group name '%s' contains invalid characters" % (gid, gid))
        if gid in groups:
            raise ValueError("world: group '%s' defined twice" % gid)
        extra = set(g) - GROUP_KEYS
        if extra:
            raise ValueError("world: group '%s': unknown key(s) %s (known: %s)" % (gid, ", ".join(sorted(extra)), ", ".join(sorted(GROUP_KEYS))))
        members = g.get("members", [])
        if not isinstance(members, list):
            raise ValueError("world: group '%s': 'members' must be a list of userids" % gid)
        for m in members:
            if m not in users:
                raise ValueError("world: group '%s': member '%s' is not a user of the world" % (gid, m))
        if g.get("comment") is not None and not isinstance(g["comment"], str):
            raise ValueError("world: group '%s': 'comment' must be a string" % gid)
        groups[gid] = {"members": set(members), "comment": g.get("comment"), "acl": norm_acl(g.get("acl", {}), "group " + gid)}
        for m in members:
            users[m]["groups"].add(gid)
    return users, groups


class Auth:
    """Tickets, CSRF tokens, TOTP and the sign-in of POST /access/ticket."""

    def __init__(self, users, groups):
        self.users = users
        self.groups = groups
        self.ticket_key = os.urandom(32)  # stands in for the RSA authkey
        self.csrf_secret = os.urandom(32)  # pve-www.key
        self.offset = 0  # POST /_sim/clock: the auth clock runs this far ahead
        self.failures = {}  # username as posted -> failed sign-ins
        self.successes = {}
        self.log = []  # [{time, username, result, msg}], msg as PVE syslogs it

    def now(self):
        return int(time.time()) + self.offset

    # -- tickets (PVE::Ticket) ----------------------------------------------

    def _sig(self, plain):
        # 256 bytes, as an RSA-2048 signature: 344 base64 characters
        out = b"".join(hmac.new(self.ticket_key, bytes([i]) + plain.encode("utf-8"), hashlib.sha256).digest() for i in range(8))
        return base64.b64encode(out).decode("ascii")

    def assemble_ticket(self, data, aad=None):
        plain = "PVE:%s:%08X" % (data.replace(":", "%3A"), self.now())  # uri_escape($data, ':')
        full = plain if aad is None else plain + ":" + aad
        return plain + "::" + self._sig(full)

    def verify_ticket(self, ticket, aad=None):
        """The ticket's data (unescaped) when signed and within its age, else None."""
        m = re.match(r"^(PVE:\S+)::([^:\s]+)$", ticket or "")
        if not m:
            return None
        plain, sig = m.group(1), m.group(2)
        full = plain if aad is None else plain + ":" + aad
        if not hmac.compare_digest(sig, self._sig(full)):
            return None
        m = re.match(r"^PVE:(?:(\S+):)?([A-Z0-9]{8})$", plain)
        if not m or m.group(1) is None:
            return None
        age = self.now() - int(m.group(2), 16)
        if not (-AUTH_GRACE < age < TICKET_LIFETIME):
            return None
        return urllib.parse.unquote(m.group(1))

    def ticket_user(self, ticket):
        """pve-manager's auth_handler: the user of a full ticket who is
        enabled now, else None ('Authentication failed!')."""
        data = self.verify_ticket(ticket)
        if data is None or data.startswith("!tfa!"):
            return None
        try:
            self.check_user_enabled(data)
        except AuthFailure:
            return None
        return data

    def csrf_token(self, userid):
        ts = "%08X" % self.now()
        return ts + ":" + self._csrf_digest(ts, userid)

    def _csrf_digest(self, ts, userid):
        d = hmac.new(self.csrf_secret, ("%s:%s" % (ts, userid)).encode("utf-8"), hashlib.sha256).digest()
        return base64.b64encode(d).decode("ascii").rstrip("=")  # Digest::SHA's *_base64: no padding

    def verify_csrf(self, userid, token):
        m = re.match(r"^([A-Z0-9]{8}):(\S+)$", token or "")
        if not m:
            return False
        age = self.now() - int(m.group(1), 16)
        return hmac.compare_digest(m.group(2), self._csrf_digest(m.group(1), userid)) and -AUTH_GRACE < age < TICKET_LIFETIME

    # -- users ----------------------------------------------------------------

    def check_user_enabled(self, userid):
        try:
            verify_username(userid)
        except ValueError as e:
            raise AuthFailure(str(e))
        u = self.users.get(userid)
        if u is None:
            raise AuthFailure("no such user ('%s')" % userid)
        if not u["enable"]:
            raise AuthFailure("user '%s' is disabled" % userid)
        if u["expire"] and u["expire"] < self.now():
            raise AuthFailure("user '%s' access expired" % userid)
        return u

    def _verify_totp(self, u, response):
        """proxmox-tfa TfaUserData::verify_totp, for a 'totp:CODE' response."""
        if not response.startswith("totp:"):
            raise AuthFailure("invalid tfa response")
        if u["totp_locked"]:
            raise AuthFailure("failed 2nd factor: TOTP limit reached, locked")
        code = response[len("totp:") :]
        step = self.now() // TOTP_STEP
        for c in (step - 1, step, step + 1):
            if re.match(r"^\d{%d}$" % TOTP_DIGITS, code) and hmac.compare_digest(totp_code(u["totp_key"], c), code):
                if c <= u["totp_last"]:
                    self._totp_failed(u)
                    raise AuthFailure("failed 2nd factor (rejecting reused TOTP value)")
                u["totp_last"] = c
                u["totp_failures"] = 0
                return
        self._totp_failed(u)
        raise AuthFailure("failed 2nd factor (totp verification failed)")

    @staticmethod
    def _totp_failed(u):
        u["totp_failures"] += 1
        if u["totp_failures"] >= TOTP_FAILURE_LIMIT:
            u["totp_locked"] = True

    # -- POST /access/ticket --------------------------------------------------

    def create_ticket(self, p, check_privs):
        """PVE::API2::AccessControl create_ticket. Returns the answer's data;
        raises AuthFailure (-> 401 'authentication failure')."""
        username = p["username"]
        if p.get("realm"):
            username += "@" + p["realm"]
        try:
            res = self._create_ticket(username, p, check_privs)
        except AuthFailure as e:
            self.failures[username] = self.failures.get(username, 0) + 1
            self.log.append({"time": self.now(), "username": username, "result": "failure", "msg": str(e)})
            raise
        if res.get("NeedTFA"):
            self.log.append({"time": self.now(), "username": username, "result": "tfa-challenge", "msg": "first factor accepted, second factor required"})
        else:
            self.successes[username] = self.successes.get(username, 0) + 1
            self.log.append({"time": self.now(), "username": username, "result": "success", "msg": "successful auth for user '%s'" % username})
        return res

    def _create_ticket(self, username, p, check_privs):
        u = self.check_user_enabled(username)
        password = p["password"]
        otp = p.get("otp")
        challenge = p.get("tfa-challenge")
        if p.get("path") and p.get("privs"):
            # verify_auth: a ticket of the user or the password (the first
            # factor only, as PVE's authenticate_user in scalar context)
            if self.ticket_user(password) != username:
                self._first_factor(u, password)
            if not check_privs(username, p["path"], p["privs"]):
                raise AuthFailure("no permission (%s, %s)" % (p["path"], p["privs"]))
            return {"username": username}
        if otp is not None and challenge is not None:
            raise AuthFailure("TFA response should be in 'password', not 'otp' when 'tfa-challenge' is set")
        need_tfa = False
        if challenge is None and self.ticket_user(password) in (username, "root@pam"):
            pass  # a valid ticket renews itself (root@pam may make any user's)
        elif challenge is not None:
            if u["totp_key"] is None:
                raise AuthFailure("no 2nd factor available for user '%s'" % username)
            data = self.verify_ticket(challenge, aad=username)
            if data is None or not data.startswith("!tfa!"):
                raise AuthFailure("permission denied - invalid PVE ticket")
            self._verify_totp(u, password)
        else:
            self._first_factor(u, password)
            if u["totp_key"] is not None:
                if otp is not None:
                    self._verify_totp(u, otp)
                else:
                    need_tfa = True
        if need_tfa:
            return {
                "ticket": self.assemble_ticket('!tfa!{"totp":true}', aad=username),
                "username": username,
                "CSRFPreventionToken": self.csrf_token(username),
                "NeedTFA": 1,
            }
        return {"ticket": self.assemble_ticket(username), "username": username, "CSRFPreventionToken": self.csrf_token(username)}

    @staticmethod
    def _first_factor(u, password):
        if u["realm"] not in REALMS:
            raise AuthFailure("auth domain '%s' does not exist" % u["realm"])
        if not password:
            raise AuthFailure("no password")
        if u["password"] is None:
            raise AuthFailure("no password set" if u["realm"] == "pve" else "Authentication failure")
        if not hmac.compare_digest(password.encode("utf-8"), u["password"].encode("utf-8")):
            raise AuthFailure("invalid credentials" if u["realm"] == "pve" else "Authentication failure")

    def state(self):
        return {
            "clock_offset": self.offset,
            "failures": dict(self.failures),
            "successes": dict(self.successes),
            "log": list(self.log),
            "users": {
                uid: {"enable": u["enable"], "expire": u["expire"], "groups": sorted(u["groups"]), "totp": u["totp_key"] is not None, "totp_failures": u["totp_failures"], "totp_locked": u["totp_locked"]}
                for uid, u in sorted(self.users.items())
            },
            "groups": {gid: sorted(g["members"]) for gid, g in sorted(self.groups.items())},
        }


def admin_privs(version):
    """The privileges of the Administrator role (root@pam has them all):
    $privgroups of PVE::AccessControl, 8.4 or 9.1."""
    p = [
        "VM.Allocate", "VM.Audit", "VM.Backup", "VM.Clone", "VM.Config.CDROM", "VM.Config.CPU", "VM.Config.Cloudinit", "VM.Config.Disk",
        "VM.Config.HWType", "VM.Config.Memory", "VM.Config.Network", "VM.Config.Options", "VM.Console", "VM.Migrate", "VM.PowerMgmt",
        "VM.Snapshot", "VM.Snapshot.Rollback",
        "Sys.AccessNetwork", "Sys.Audit", "Sys.Console", "Sys.Incoming", "Sys.Modify", "Sys.PowerMgmt", "Sys.Syslog",
        "Datastore.Allocate", "Datastore.AllocateSpace", "Datastore.AllocateTemplate", "Datastore.Audit",
        "SDN.Allocate", "SDN.Audit", "SDN.Use", "User.Modify", "Group.Allocate", "Realm.Allocate", "Realm.AllocateUser",
        "Pool.Allocate", "Pool.Audit", "Mapping.Audit", "Mapping.Modify", "Mapping.Use", "Permissions.Modify",
    ]
    if version == 8:
        p.append("VM.Monitor")
    else:
        p += ["VM.GuestAgent.Audit", "VM.GuestAgent.FileRead", "VM.GuestAgent.FileSystemMgmt", "VM.GuestAgent.FileWrite", "VM.GuestAgent.Unrestricted", "VM.Replicate"]
    return sorted(p)


# compute_api_permission (PVE::RPCEnvironment): the 'cap' of a ticket answer
_CAP_RE = {
    "vms": r"^(VM\.|Permissions\.Modify)",
    "access": r"^((User|Group)\.|Permissions\.Modify)",
    "storage": r"^(Datastore\.|Permissions\.Modify)",
    "nodes": r"^(Sys\.|Permissions\.Modify)",
    "sdn": r"^(SDN\.|Permissions\.Modify)",
    "dc": r"^(Sys\.Audit|Sys\.Modify|SDN\.)",
    "mapping": r"^(Mapping\.|Permissions.Modify)",
}


def compute_cap(privs_of, acl_paths):
    """{vms|access|storage|nodes|sdn|dc|mapping: {priv: 1}} from the
    privileges on the required paths and on every path an ACL names."""
    res = {k: {} for k in _CAP_RE}
    seen = set()
    for path in ["/", "/nodes", "/access/groups", "/vms", "/storage", "/sdn", "/mapping"] + list(acl_paths):
        if path in seen:
            continue
        seen.add(path)
        have = privs_of(path)
        m = re.match(r"^/(\w+)", path)
        top = m.group(1) if m else "dc"
        if top == "pool":
            for priv in have:
                if priv.startswith("VM."):
                    res["vms"][priv] = 1
                elif priv.startswith("Datastore."):
                    res["storage"][priv] = 1
                elif priv == "Permissions.Modify":
                    res["storage"][priv] = 1
                    res["vms"][priv] = 1
            continue
        rx = _CAP_RE.get(top)
        if rx is None:
            continue
        for priv in have:
            if re.match(rx, priv):
                res[top][priv] = 1
    return res
