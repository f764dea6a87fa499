#!/usr/bin/env python3
"""privs.py OPS_DOCTOR_C DRY_RUN_OUTPUT PVE_MAJOR POOL TEMPLATE STORAGE BRIDGE [nodes|no-nodes]

Compare the privileges `sandboxctl doctor` checks (parsed from ops_doctor.c:
its *_privs arrays and the PVE 8/9 guest agent choice) with those the pveum
script grants (parsed from its printed commands: `pveum role add|modify NAME
--privs A,B` and `pveum acl modify PATH --roles NAME --users U|--tokens T`).
Every path must be granted exactly the checked privileges, to the user and
to its token, and no other path anything.  Prints the differences; exit 0
when there are none.
"""
import re
import shlex
import sys


def doctor_lists(source):
    text = open(source).read()
    lists = {}
    for name, body in re.findall(r"static const char \*const (\w+_privs)\[\]\s*=\s*\{(.*?)\};", text, re.S):
        lists[name] = set(re.findall(r'"([^"]+)"', body))
    agent = re.search(r'pve_major >= 9 \? "([^"]+)" : "([^"]+)"', text)
    if agent is None:
        sys.exit("privs.py: no PVE 8/9 guest agent choice found in %s" % source)
    return lists, {9: agent.group(1), 8: agent.group(2)}


def granted(output):
    roles, acls = {}, {}
    for line in open(output):
        if not line.startswith("+ pveum "):
            continue
        words = shlex.split(line[2:])
        if words[1:3] in (["role", "add"], ["role", "modify"]):
            roles[words[3]] = set(words[words.index("--privs") + 1].split(","))
        elif words[1:3] == ["acl", "modify"]:
            path, role = words[3], words[words.index("--roles") + 1]
            who = "users" if "--users" in words else "tokens"
            acls.setdefault(path, {}).setdefault(who, set()).add(role)
    result = {}
    for path, by in acls.items():
        result[path] = {who: set().union(*(roles.get(r, {"<undefined role %s>" % r}) for r in rs))
                        for who, rs in by.items()}
    return result


def main(argv):
    if len(argv) not in (8, 9):
        sys.exit(__doc__)
    source, output, major, pool, template, storage, bridge = argv[1:8]
    nodes = len(argv) == 8 or argv[8] == "nodes"
    lists, agent = doctor_lists(source)
    want = {
        "/pool/" + pool: lists["pool_privs"] | {agent[int(major)]},
        "/vms/" + template: lists["template_privs"],
        "/storage/" + storage: lists["storage_privs"],
        "/sdn/zones/localnetwork/" + bridge: lists["bridge_privs"],
    }
    if nodes:
        want["/nodes"] = lists["nodes_privs"]
    if len(lists) != 5:
        print("ops_doctor.c has %d privilege lists, this check knows 5: %s" % (len(lists), sorted(lists)))
        return 1
    got = granted(output)
    bad = 0
    for path in sorted(set(want) | set(got)):
        for who in ("users", "tokens"):
            w, g = want.get(path, set()), got.get(path, {}).get(who, set())
            if w != g:
                bad = 1
                print("%s (%s): doctor checks %s, the script grants %s; missing %s, extra %s"
                      % (path, who, sorted(w), sorted(g), sorted(w - g), sorted(g - w)))
    return bad


if __name__ == "__main__":
    sys.exit(main(sys.argv))
