"""Proxmox VE API schema: path lookup, parameter validation, permission checks.

Everything here is driven by the official API schema JSON (the tree the API
viewer renders). Nothing is written per call: a path template such as
/nodes/{node}/qemu/{vmid}/config is found by walking the tree, and each
parameter is checked against its schema entry (type, enum, pattern, min/max,
maxLength, format, optional) the way PVE's JSONSchema.pm does it, with the same
messages where we know them.
"""

import re

# Formats we check. The rest are accepted as any string (loosely), which is
# what "format-checked loosely" means in the README.
_NODE_RE = re.compile(r"^[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?$")
_CONFIGID_RE = re.compile(r"^[a-z][a-z0-9_-]+$", re.I)
_POOLID_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_\-]*$")
_STORAGEID_RE = re.compile(r"^[a-z][a-z0-9\-_.]*[a-z0-9]$", re.I)
_DNS_LABEL = r"[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?"
_DNSNAME_RE = re.compile(r"^(%s\.)*%s$" % (_DNS_LABEL, _DNS_LABEL))
TAG_RE = re.compile(r"^[a-z0-9_][a-z0-9_+.\-]*$", re.I)
_IFACE_RE = re.compile(r"^[a-zA-Z][a-zA-Z0-9_]{1,20}([:.]\d+)?$")
_BRIDGE_RE = re.compile(r"^[-_.\w\d]+$")
_IPV4 = r"(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)"
_IPV4_RE = re.compile("^" + _IPV4 + "$")
_CIDR4_RE = re.compile("^" + _IPV4 + r"/(3[0-2]|[12]?\d)$")
_MAC_RE = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


def _is_ipv6(s):
    import ipaddress

    try:
        ipaddress.IPv6Address(s)
        return True
    except ValueError:
        return False


def _ip_or_cidr(s):
    import ipaddress

    try:
        ipaddress.ip_network(s, strict=False)
        return True
    except ValueError:
        return False


def split_tags(value):
    """pve-tag-list: tags separated by ';', ',' or spaces."""
    return [t for t in re.split(r"[;, ]+", value) if t]


def _fw_addr_ok(s):
    for part in s.split(","):
        part = part.strip()
        if not part:
            return False
        if part.startswith("+") or part.startswith("dc/") or part.startswith("guest/"):
            continue  # ipset or alias reference
        if "-" in part and not _ip_or_cidr(part):
            lo, _, hi = part.partition("-")
            if not (_ip_or_cidr(lo) and _ip_or_cidr(hi)):
                return False
            continue
        if not _ip_or_cidr(part) and not re.match(r"^[A-Za-z][A-Za-z0-9\-_]+$", part):
            return False
    return True


def _port_spec_ok(s):
    for part in s.split(","):
        if not re.match(r"^(\d+(:\d+)?|[a-z][a-z0-9\-]*)$", part):
            return False
        for n in re.findall(r"\d+", part):
            if int(n) > 65535:
                return False
    return True


# format name -> (check function, message)
_FORMATS = {
    "pve-node": (lambda v: bool(_NODE_RE.match(v)), "value does not look like a valid node name"),
    "pve-configid": (lambda v: bool(_CONFIGID_RE.match(v)), "invalid configuration ID '{v}'"),
    "pve-configid-list": (
        lambda v: all(_CONFIGID_RE.match(x) for x in re.split(r"[,; ]+", v) if x),
        "invalid configuration ID list",
    ),
    "pve-poolid": (lambda v: bool(_POOLID_RE.match(v)), "invalid pool ID '{v}'"),
    "pve-storage-id": (lambda v: bool(_STORAGEID_RE.match(v)), "storage ID '{v}' contains illegal characters"),
    "dns-name": (lambda v: bool(_DNSNAME_RE.match(v)), "value does not look like a valid DNS name"),
    "pve-tag-list": (lambda v: bool(split_tags(v)) and all(TAG_RE.match(t) for t in split_tags(v)), "invalid tag '{v}'"),
    "pve-iface": (lambda v: bool(_IFACE_RE.match(v)), "invalid network interface name '{v}'"),
    "pve-bridge-id": (lambda v: bool(_BRIDGE_RE.match(v)), "invalid bridge ID '{v}'"),
    "ipv4": (lambda v: bool(_IPV4_RE.match(v)), "value does not look like a valid IPv4 address"),
    "ipv6": (_is_ipv6, "value does not look like a valid IPv6 address"),
    "CIDRv4": (lambda v: bool(_CIDR4_RE.match(v)), "value does not look like a valid IPv4 network configuration"),
    "IPorCIDR": (_ip_or_cidr, "value does not look like a valid IP address or CIDR network"),
    "IPorCIDRorAlias": (
        lambda v: _ip_or_cidr(v) or bool(re.match(r"^(dc/|guest/)?[A-Za-z][A-Za-z0-9\-_]+$", v)),
        "value does not look like a valid IP address or CIDR network",
    ),
    "pve-fw-addr-spec": (_fw_addr_ok, "invalid address spec '{v}'"),
    "pve-fw-dport-spec": (_port_spec_ok, "invalid port spec '{v}'"),
    "pve-fw-sport-spec": (_port_spec_ok, "invalid port spec '{v}'"),
    "pve-fw-protocol-spec": (lambda v: bool(re.match(r"^([a-z][a-z0-9\-]*|\d{1,3})$", v, re.I)), "invalid protocol '{v}'"),
    "mac-addr": (lambda v: bool(_MAC_RE.match(v)), "value does not look like a valid MAC address"),
    # PVE::Auth::Plugin / PVE::AccessControl
    "pve-realm": (lambda v: bool(re.match(r"^[A-Za-z][A-Za-z0-9\.\-_]+$", v)), "value does not look like a valid realm"),
    "pve-userid": (lambda v: 3 <= len(v) <= 64 and bool(re.match(r"^[^\s:/]+@[A-Za-z][A-Za-z0-9\.\-_]+$", v)), "value '{v}' does not look like a valid user name"),
    "pve-groupid": (lambda v: bool(re.match(r"^[A-Za-z0-9\.\-_]+$", v)), "group name '{v}' contains invalid characters"),
}

# Property-string formats given by name (not as an object in the schema).
_IPCONFIG_KEYS = {"ip", "gw", "ip6", "gw6"}


def _perl_pattern(p):
    """PVE patterns are Perl regexes, anchored by the validator (m/^$pattern$/)."""
    p = p.replace("(?^:", "(?:").replace("(?^i:", "(?i:")
    return re.compile("^(?:" + p + ")$")


class ParamError(Exception):
    """400: {param: message}."""

    def __init__(self, errors):
        super().__init__("Parameter verification failed.")
        self.errors = errors


_BOOL_TRUE = {"1", "true", "yes", "on"}
_BOOL_FALSE = {"0", "false", "no", "off"}


class Schema:
    def __init__(self, path):
        import json

        with open(path, encoding="utf-8") as f:
            tree = json.load(f)
        self.root = {"path": "", "children": tree, "info": {}}
        self.index = {}
        self._walk(tree)
        self._pattern_cache = {}

    def _walk(self, nodes):
        for n in nodes:
            self.index[n["path"]] = n
            self._walk(n.get("children", []))

    def has(self, template):
        return template in self.index

    def lookup(self, path):
        """Walk the tree one segment at a time; a literal child wins over a
        {variable} child. Returns (node, {var: value}) or (None, None)."""
        segs = [s for s in path.split("/") if s != ""]
        node = self.root
        params = {}
        for seg in segs:
            nxt = None
            var = None
            for c in node.get("children", []):
                last = c["path"].rsplit("/", 1)[-1]
                if last == seg:
                    nxt = c
                    break
                if last.startswith("{") and last.endswith("}") and var is None:
                    var = c
            if nxt is None and var is not None:
                nxt = var
                params[var["path"].rsplit("/", 1)[-1][1:-1]] = seg
            if nxt is None:
                return None, None
            node = nxt
        if node is self.root:
            return None, None
        return node, params

    def prop_for(self, props, name):
        """Schema entry for a parameter; 'net[n]' covers net0, net1, ..."""
        if name in props:
            return props[name]
        m = re.match(r"^([a-z][a-z_\-]*?)(\d+)$", name)
        if m and (m.group(1) + "[n]") in props:
            return props[m.group(1) + "[n]"]
        return None

    def validate(self, info, params, from_json):
        """Check and convert params in place (strings to int/bool as PVE
        does). Raises ParamError with every failing parameter."""
        pschema = info.get("parameters", {})
        props = pschema.get("properties", {})
        errors = {}
        out = {}
        for name, value in params.items():
            ps = self.prop_for(props, name)
            if ps is None:
                if pschema.get("additionalProperties", 1) == 0:
                    errors[name] = "property is not defined in schema and the schema does not allow additional properties"
                else:
                    out[name] = value
                continue
            try:
                out[name] = self.check_value(name, ps, value, from_json)
            except ValueError as e:
                errors[name] = str(e)
        for name in params:
            # JSONSchema.pm check_object: a set property's 'requires'
            req = (self.prop_for(props, name) or {}).get("requires")
            if isinstance(req, str) and req not in params and req not in errors:
                errors[req] = "missing property required by '%s'" % name
        for name, ps in props.items():
            if "[n]" in name or ps.get("optional"):
                continue
            if name not in params and name not in errors:
                errors[name] = "property is missing and it is not optional"
        if errors:
            raise ParamError(errors)
        params.clear()
        params.update(out)

    def _regex(self, p):
        r = self._pattern_cache.get(p)
        if r is None:
            try:
                r = _perl_pattern(p)
            except re.error:
                r = False
            self._pattern_cache[p] = r
        return r

    def check_value(self, name, ps, value, from_json):
        t = ps.get("type", "string")
        if t == "array":
            if not isinstance(value, list):
                value = [value]
            items = ps.get("items", {"type": "string"})
            return [self.check_value(name, items, v, from_json) for v in value]
        if isinstance(value, (list, dict)):
            raise ValueError("type check ('%s') failed - got %s" % (t, "ARRAY" if isinstance(value, list) else "HASH"))
        if t == "boolean":
            if isinstance(value, bool):
                return 1 if value else 0
            s = str(value).lower()
            if s in _BOOL_TRUE:
                return 1
            if s in _BOOL_FALSE:
                return 0
            raise ValueError("type check ('boolean') failed - got '%s'" % value)
        if t == "integer":
            if isinstance(value, bool) or not re.match(r"^-?\d+$", str(value).strip() if isinstance(value, int) else str(value)):
                raise ValueError("type check ('integer') failed - got '%s'" % value)
            v = int(value)
            self._range(ps, v)
            self._enum(ps, str(v))
            if ps.get("format") == "pve-vmid" and v < 100:
                raise ValueError("value does not look like a valid VM ID")
            return v
        if t == "number":
            if isinstance(value, bool) or not re.match(r"^-?(\d+)?(\.\d+)?([eE][+-]?\d+)?$", str(value)) or str(value) in ("", "-"):
                raise ValueError("type check ('number') failed - got '%s'" % value)
            v = float(value)
            self._range(ps, v)
            return v
        # string
        if isinstance(value, bool):
            value = "1" if value else "0"
        v = str(value)
        if "maxLength" in ps and len(v) > int(ps["maxLength"]):
            raise ValueError("value may only be %s characters long" % ps["maxLength"])
        if "minLength" in ps and len(v) < int(ps["minLength"]):
            raise ValueError("value must be at least %s characters long" % ps["minLength"])
        self._enum(ps, v)
        if "pattern" in ps:
            r = self._regex(ps["pattern"])
            if r is not False and not r.match(v):
                raise ValueError("value does not match the regex pattern")
        fmt = ps.get("format")
        if isinstance(fmt, dict):
            self.check_property_string(fmt, v)
        elif fmt == "pve-qm-ipconfig":
            self._check_ipconfig(v)
        elif fmt in _FORMATS:
            fn, msg = _FORMATS[fmt]
            if not fn(v):
                raise ValueError(msg.format(v=v))
        return v

    @staticmethod
    def _range(ps, v):
        if "minimum" in ps and v < float(ps["minimum"]):
            raise ValueError("value must have a minimum value of %s" % ps["minimum"])
        if "maximum" in ps and v > float(ps["maximum"]):
            raise ValueError("value must have a maximum value of %s" % ps["maximum"])

    @staticmethod
    def _enum(ps, v):
        if "enum" in ps and v not in [str(e) for e in ps["enum"]]:
            raise ValueError("value '%s' does not have a value in the enumeration '%s'" % (v, ", ".join(str(e) for e in ps["enum"])))

    def check_property_string(self, fmt, value):
        """key=value,... against a property-string format object. Keys must
        exist; typed sub-values (integer, boolean, enum) are checked."""
        default_key = None
        for k, d in fmt.items():
            if isinstance(d, dict) and d.get("default_key"):
                default_key = k
        seen = set()
        for part in value.split(","):
            if part == "":
                raise ValueError("format error: empty key")
            if "=" in part:
                k, _, v = part.partition("=")
            elif default_key is not None and default_key not in seen:
                k, v = default_key, part
            elif part in fmt and isinstance(fmt[part], dict) and "keyAlias" in fmt[part]:
                k, v = fmt[part]["keyAlias"], part
            else:
                raise ValueError("format error: value without key, but schema does not define a default key")
            d = fmt.get(k)
            if d is None:
                raise ValueError("format error: %s: property is not defined in schema and the schema does not allow additional properties" % k)
            if "keyAlias" in d:  # e.g. net0 'virtio=MAC': model=virtio, macaddr=MAC
                seen.add(d["keyAlias"])
                if v and not _MAC_RE.match(v):
                    raise ValueError("format error: macaddr: value does not look like a valid MAC address")
                continue
            if "alias" in d:
                k, d = d["alias"], fmt.get(d["alias"], {})
            if k in seen:
                raise ValueError("format error: duplicate key in comma-separated list property: %s" % k)
            seen.add(k)
            try:
                self.check_value(k, d, v, False)
            except ValueError as e:
                raise ValueError("format error: %s: %s" % (k, e))
        for k, d in fmt.items():
            if isinstance(d, dict) and not d.get("optional") and "alias" not in d and "keyAlias" not in d and "default" not in d and k not in seen:
                raise ValueError("format error: %s: property is missing and it is not optional" % k)

    @staticmethod
    def _check_ipconfig(v):
        for part in v.split(","):
            k, eq, val = part.partition("=")
            if not eq or k not in _IPCONFIG_KEYS:
                raise ValueError("format error: %s: property is not defined in schema" % k)
            if k == "ip" and val != "dhcp" and not _CIDR4_RE.match(val):
                raise ValueError("format error: ip: invalid format - invalid IPv4 network configuration '%s'" % val)
            if k == "gw" and not _IPV4_RE.match(val):
                raise ValueError("format error: gw: invalid format - value does not look like a valid IPv4 address")


def typed_config_value(props_for, key, value):
    """A config value as GET /config returns it: integers and booleans as
    JSON numbers, everything else (including memory in 8.x) as a string."""
    ps = props_for(key)
    t = ps.get("type") if ps else "string"
    if t in ("integer", "boolean"):
        try:
            return int(value)
        except (TypeError, ValueError):
            return value
    if t == "number":
        try:
            return float(value)
        except (TypeError, ValueError):
            return value
    return str(value)
