"""The per-VM firewall as pve-firewall applies it, compiled to nftables
(only with --vm-net, where each running VM has a real network).

pve-firewall puts a VM's tap behind a firewall bridge (fwbr) and filters with
iptables (physdev matches, conntrack) and ebtables (MAC and ARP). Here the
tap sits on the bridge directly and one nftables ruleset does both jobs:

  table inet pve_sim     conntrack state of every IP packet, bridged ones
                         too (br_netfilter, bridge-nf-call-iptables=1, as on
                         a Proxmox host), copied into the packet mark: the
                         bridge family has no conntrack in this kernel
                         configuration (nf_conntrack_bridge), the mark carries
                         the state to the bridge chains
  table bridge pve_sim   per VM, matched on its port tap{vmid}i0:
    vmN_guard  (prerouting)  MAC filter, IP filter on IPv4 and ARP sender:
                             what ebtables and the ipfilter set do
    vmN_out    (input, forward: iifname)  invalid drop, established return,
                             dhcp/ndp, the `out` rules, policy_out
    vmN_in     (forward, output: oifname) invalid drop, established accept,
                             dhcp/ndp, the `in` rules, policy_in
  ACCEPT in an out chain is `return`, so that a packet to another VM still
  meets that VM's in chain (pve-firewall: PVEFW-SET-ACCEPT-MARK).

A VM is filtered when the cluster firewall is on, its options say enable=1
and its net0 has firewall=1 (as PVE). Rules are compiled for every such VM,
running or not (the port name is known in advance), and the ruleset is
replaced in one nft transaction whenever the compiled text changes.

Redirected packets.  On a Proxmox node a VM's out rules run on its
firewall bridge (fwbr), before the frame reaches vmbr99, where the node's
nat prerouting (deploy/proxmox/egressd-redirect.nft) may redirect it to a
local port; so those rules see the original destination.  Here the tap is
on vmbr99 itself, br_netfilter runs that nat before the bridge's input hook,
and the out chain would see the rewritten one.  So ct_dnat marks a
redirected packet (DNAT) and its original tcp port when that is 443 or 80
(DNAT_443, DNAT_80), and an out rule matches such a packet by those: only
a rule without `dest` (the original address is not carried) whose ports
hold the original one; a rule with `dest` never matches a redirected
packet.

A rule with a `macro` is expanded as pve-firewall's apply_macro does: one
rule per line of the macro, the macro's fields (proto, dport, sport) with
the rule's own (source, dest, action, iface, ...) added; a field the rule
gives that the macro also sets must be equal (else the API refuses the
rule, as PVE's verify_rule). Only the macros in MACROS are modelled.
"""

import ipaddress
import re
import subprocess

EST = 0x10000  # mark bit: conntrack says established or related
INV = 0x20000  # mark bit: conntrack says invalid
DNAT = 0x40000  # mark bit: redirected by the node's nat prerouting
DNAT_PORTS = {443: 0x80000, 80: 0x100000}  # ... and its original tcp port was this
TABLE = "pve_sim"

# pve-firewall's defaults for a VM's options (the API schema's `default`s).
DEFAULTS = {"enable": 0, "policy_in": "DROP", "policy_out": "ACCEPT", "macfilter": 1, "ipfilter": 0, "dhcp": 0, "ndp": 1, "radv": 0}
PROTOS = {"tcp", "udp", "icmp", "icmpv6", "ipv6-icmp", "sctp", "udplite", "esp", "ah", "gre"}


# pve-firewall's macros (PVE/Firewall.pm, $pve_fw_macros), those modelled:
# name -> the rules it stands for ("PARAM" takes the rule's own action).
MACROS = {
    "DNS": [{"action": "PARAM", "proto": "udp", "dport": "53"},
            {"action": "PARAM", "proto": "tcp", "dport": "53"}],
}


def macro_name(name):
    """The preferred spelling of a macro (PVE looks them up case-insensitively), or None."""
    for k in MACROS:
        if k.lower() == str(name).lower():
            return k
    return None


def expand_macro(rule):
    """The rules a macro rule stands for (apply_macro); [rule] without a
    macro.  Raises ValueError(param, message) as PVE's verification does."""
    if not rule.get("macro"):
        return [rule]
    name = macro_name(rule["macro"])
    if name is None:
        raise ValueError("macro", "unknown macro '%s'" % rule["macro"])
    out = []
    for templ in MACROS[name]:
        r, used = {}, set()
        for k, v in templ.items():
            if v == "PARAM":
                v = rule.get(k)
                used.add(k)
            if v is None:
                raise ValueError("macro", "missing parameter '%s' in macro '%s'" % (k, name))
            r[k] = v
        for k, v in rule.items():
            if k == "macro" or v is None or k in used:
                continue
            if k in r:
                if str(r[k]) != str(v):
                    raise ValueError(k, "parameter '%s' already define in macro (value = '%s')" % (k, r[k]))
            else:
                r[k] = v
        out.append(r)
    return out


class Unsupported(Exception):
    """A rule this model cannot express: it is left out and said so."""


def _opt(opts, key):
    v = opts.get(key, DEFAULTS[key])
    if key.startswith("policy_"):
        return str(v).upper()
    return 1 if v in (1, "1", True, "on", "yes") else 0


def net0_of(conf):
    """(mac lower-case, firewall on) of net0, or (None, False)."""
    v = conf.get("net0")
    if not v:
        return None, False
    m = re.search(r"(?:^|,)(?:virtio|e1000|e1000e|rtl8139|vmxnet3|macaddr)=([0-9A-Fa-f:]{17})", v)
    fw = re.search(r"(?:^|,)firewall=(1|on|yes|true)(?:,|$)", v) is not None
    return (m.group(1).lower() if m else None), fw


def tap_name(vmid):
    return "tap%di0" % vmid


def _split_v(entries):
    v4, v6 = [], []
    for e in entries:
        try:
            net = ipaddress.ip_network(e, strict=False)
        except ValueError:
            continue
        (v4 if net.version == 4 else v6).append(str(net) if net.prefixlen != net.max_prefixlen else str(net.network_address))
    return v4, v6


def _addr_spec(vm, spec, direction):
    """pve-fw-addr-spec → (family, nft value) or raise Unsupported."""
    spec = spec.strip()
    if spec.startswith("+"):
        name = spec[1:]
        if name.startswith(("dc/", "guest/")):
            name = name.split("/", 1)[1]
        s = vm.fw_ipsets.get(name)
        if s is None:
            raise Unsupported("IP set '%s' is not the VM's own" % spec)
        entries = [e["cidr"] for e in s["entries"] if not e.get("nomatch")]
    else:
        entries = []
        for part in spec.split(","):
            part = part.strip()
            if "-" in part:
                a, b = part.split("-", 1)
                try:
                    lo, hi = ipaddress.ip_address(a), ipaddress.ip_address(b)
                except ValueError:
                    raise Unsupported("address '%s'" % part)
                entries.extend(str(n) for n in ipaddress.summarize_address_range(lo, hi))
            else:
                entries.append(part)
    v4, v6 = _split_v(entries)
    if not v4 and not v6:
        raise Unsupported("address spec '%s' (aliases are not modelled)" % spec)
    if v4 and v6:
        raise Unsupported("address spec '%s' mixes IPv4 and IPv6" % spec)
    fam = "ip" if v4 else "ip6"
    return fam, "{ %s }" % ", ".join(v4 or v6)


def _ports(spec):
    out = []
    for part in str(spec).split(","):
        part = part.strip()
        if re.match(r"^\d+$", part):
            out.append(part)
        elif re.match(r"^\d+:\d+$", part):
            out.append(part.replace(":", "-"))
        else:
            raise Unsupported("port '%s' (service names are not modelled)" % part)
    return "{ %s }" % ", ".join(out)


def compile_rule(vm, rule, direction):
    """One API rule → its nft matches (without the verdict; a macro rule
    gives one per line of the macro), or None when the rule does not apply
    (disabled, other type, other interface)."""
    if not rule.get("enable") or rule.get("enable") in ("0", 0):
        return None
    if rule.get("type") != direction:
        return None
    if rule.get("iface") and rule["iface"] != "net0":
        return None  # only net0 is modelled
    try:
        rules = expand_macro(rule)
    except ValueError as e:
        raise Unsupported("macro '%s': %s" % (rule["macro"], e.args[1]))
    if direction != "out":
        return [_compile_one(vm, r, direction) for r in rules]
    out = []
    for r in rules:
        out.append("meta mark & 0x%x == 0 %s" % (DNAT, _compile_one(vm, r, direction)))
        out += _dnat_matches(vm, r)
    return out


def _port_in(spec, port):
    """Whether a dport spec ("80,443", "1000:2000") holds port."""
    for part in str(spec).split(","):
        lo, _, hi = part.strip().partition(":")
        if lo.isdigit() and int(lo) <= port <= int(hi or lo):
            return True
    return False


def _dnat_matches(vm, rule):
    """The matches by which an out rule takes a redirected packet (see the
    module's doc): none for a rule with a dest or a protocol other than tcp."""
    proto = str(rule.get("proto") or "tcp").lower()
    if rule.get("dest") or proto != "tcp":
        return []
    base = _compile_one(vm, {k: v for k, v in rule.items() if k not in ("dport", "dest")}, "out")
    return ["%s meta mark & 0x%x == 0x%x" % (base, bit, bit)
            for port, bit in sorted(DNAT_PORTS.items())
            if rule.get("dport") is None or _port_in(rule["dport"], port)]


def _compile_one(vm, rule, direction):
    parts = []
    fam = None
    for key, field in (("source", "saddr"), ("dest", "daddr")):
        if rule.get(key):
            f, val = _addr_spec(vm, rule[key], direction)
            if fam and fam != f:
                raise Unsupported("source and dest of different families")
            fam = f
            parts.append("%s %s %s" % (f, field, val))
    proto = rule.get("proto")
    if proto:
        proto = str(proto).lower()
        if proto == "ipv6-icmp":
            proto = "icmpv6"
        if proto not in PROTOS and not proto.isdigit():
            raise Unsupported("protocol '%s'" % proto)
        parts.append("meta l4proto %s" % proto)
        if rule.get("icmp-type"):
            kind = "icmpv6" if proto == "icmpv6" else "icmp"
            parts.append("%s type %s" % (kind, rule["icmp-type"]))
    for key, field in (("sport", "sport"), ("dport", "dport")):
        if rule.get(key):
            if proto not in ("tcp", "udp", "sctp", "udplite"):
                raise Unsupported("%s without tcp/udp" % key)
            parts.append("th %s %s" % (field, _ports(rule[key])))
    if fam is None:
        parts.insert(0, "ether type { ip, ip6 }")
    return " ".join(parts)


def applies(world, vm):
    """Whether pve-firewall filters this VM's net0."""
    if vm.config.get("template") == "1":
        return False
    mac, fw = net0_of(vm.config)
    return world.cluster_firewall and fw and _opt(vm.fw_options, "enable") == 1


def _vm_chains(vm, warn):
    n = vm.vmid
    o = vm.fw_options
    mac, _ = net0_of(vm.config)
    lines = []
    ipf = vm.fw_ipsets.get("ipfilter-net0", {"entries": []})["entries"]
    v4 = _split_v([e["cidr"] for e in ipf if not e.get("nomatch")])[0]
    nomatch = _split_v([e["cidr"] for e in ipf if e.get("nomatch")])[0]
    lines.append("  set vm%d_ipfilter { type ipv4_addr; flags interval;%s }" % (n, " elements = { %s };" % ", ".join(v4) if v4 else ""))
    lines.append("  set vm%d_nomatch { type ipv4_addr; flags interval;%s }" % (n, " elements = { %s };" % ", ".join(nomatch) if nomatch else ""))
    # guard: ebtables' part (MAC, ARP sender) and the ipfilter set
    g = ["  chain vm%d_guard {" % n]
    if _opt(o, "macfilter") and mac:
        g.append("    ether saddr != %s counter drop comment \"macfilter\"" % mac)
    if _opt(o, "ipfilter"):
        g.append("    arp saddr ip @vm%d_nomatch counter drop comment \"ipfilter (ARP)\"" % n)
        g.append("    arp saddr ip != @vm%d_ipfilter counter drop comment \"ipfilter (ARP)\"" % n)
        g.append("    ip saddr @vm%d_nomatch counter drop comment \"ipfilter\"" % n)
        g.append("    ip saddr != @vm%d_ipfilter counter drop comment \"ipfilter\"" % n)
    g.append("  }")
    lines += g
    for direction, pol_key in (("out", "policy_out"), ("in", "policy_in")):
        accept = "return" if direction == "out" else "accept"
        c = ["  chain vm%d_%s {" % (n, direction)]
        c.append("    ether type != { ip, ip6 } return")
        c.append("    meta mark & 0x%x == 0x%x counter drop comment \"ct invalid\"" % (INV, INV))
        c.append("    meta mark & 0x%x == 0x%x %s comment \"ct established,related\"" % (EST, EST, accept))
        if _opt(o, "dhcp"):
            sp, dp = (68, 67) if direction == "out" else (67, 68)
            c.append("    udp sport %d udp dport %d %s comment \"dhcp\"" % (sp, dp, accept))
        if _opt(o, "ndp"):
            types = "nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit" if direction == "out" else "nd-neighbor-solicit, nd-neighbor-advert, nd-router-advert"
            c.append("    icmpv6 type { %s } %s comment \"ndp\"" % (types, accept))
        if direction == "out" and not _opt(o, "radv"):
            c.append("    icmpv6 type nd-router-advert counter drop comment \"radv off\"")
        for i, rule in enumerate(vm.fw_rules):
            try:
                matches = compile_rule(vm, rule, direction)
            except Unsupported as e:
                warn("VM %d firewall rule %d left out: %s" % (n, i, e))
                continue
            if matches is None:
                continue
            act = str(rule.get("action", "")).upper()
            if act == "ACCEPT":
                verdict = accept
            elif act in ("DROP", "REJECT"):
                verdict = "drop"  # REJECT: no reject in this kernel's bridge family
            else:
                warn("VM %d firewall rule %d left out: action '%s' (security groups are not modelled)" % (n, i, act))
                continue
            for m in matches:
                c.append("    %s counter %s comment \"rule %d\"" % (m, verdict, i))
        pol = _opt(o, pol_key)
        c.append("    counter %s comment \"%s %s\"" % (accept if pol == "ACCEPT" else "drop", pol_key, pol))
        c.append("  }")
        lines += c
    return lines


def compile_world(world, warn):
    """The whole ruleset text (nft -f input), or '' when no VM is filtered."""
    vms = [vm for vm in sorted(world.vms.values(), key=lambda v: v.vmid) if applies(world, vm)]
    if not vms:
        return ""
    out = ["table inet %s {" % TABLE]
    for hook in ("prerouting", "output"):
        out += [
            "  chain ct_%s {" % hook,
            "    type filter hook %s priority -150; policy accept;" % hook,
            "    ct state established,related meta mark set meta mark or 0x%x" % EST,
            "    ct state invalid meta mark set meta mark or 0x%x" % INV,
            "  }",
        ]
    out += ["  chain ct_dnat {",
            "    type filter hook prerouting priority -90; policy accept;",
            "    ct status dnat meta mark set meta mark or 0x%x" % DNAT]
    out += ["    meta l4proto tcp ct status dnat ct original proto-dst %d meta mark set meta mark or 0x%x"
            % (port, bit) for port, bit in sorted(DNAT_PORTS.items())]
    out.append("  }")
    out.append("}")
    out.append("table bridge %s {" % TABLE)
    base = {"guard": ["  chain prerouting {", "    type filter hook prerouting priority -300; policy accept;"],
            "input": ["  chain input {", "    type filter hook input priority 0; policy accept;"],
            "forward": ["  chain forward {", "    type filter hook forward priority 0; policy accept;"],
            "output": ["  chain output {", "    type filter hook output priority 0; policy accept;"]}
    for vm in vms:
        tap = tap_name(vm.vmid)
        base["guard"].append('    iifname "%s" jump vm%d_guard' % (tap, vm.vmid))
        base["input"].append('    iifname "%s" jump vm%d_out' % (tap, vm.vmid))
        base["forward"].append('    iifname "%s" jump vm%d_out' % (tap, vm.vmid))
        base["output"].append('    oifname "%s" jump vm%d_in' % (tap, vm.vmid))
    for vm in vms:
        base["forward"].append('    oifname "%s" jump vm%d_in' % (tap_name(vm.vmid), vm.vmid))
    for vm in vms:
        out += _vm_chains(vm, warn)
    for k in ("guard", "input", "forward", "output"):
        out += base[k] + ["  }"]
    out.append("}")
    return "\n".join(out) + "\n"


def apply(text):
    """Replace both tables in one transaction ('' removes them); '' or the
    error text of nft."""
    pre = "".join("table %s %s {}\ndelete table %s %s\n" % (f, TABLE, f, TABLE) for f in ("inet", "bridge"))
    p = subprocess.run(["nft", "-f", "-"], input=(pre + text).encode(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        return p.stdout.decode("utf-8", "replace").strip() or "nft exited with %d" % p.returncode
    return ""
