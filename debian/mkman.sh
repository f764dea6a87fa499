#!/bin/sh
# debian/mkman.sh PROGRAM SECTION OUT - a manual page for PROGRAM whose
# synopsis is the program's own usage text (what it prints for -h), so that
# the page cannot drift from the program; the rest is the short text below
# and the way to the full documentation.
set -eu
prog=$1
section=$2
out=$3
name=$(basename "$prog")
version=$(dpkg-parsechangelog -SVersion)

case $name in
egressd)
    what='egress allow-list proxy for sandbox VMs'
    text='egressd is the one way out of the sandbox bridge: an HTTP(S) proxy, transparent TLS and HTTP listeners and a policy DNS server that let each sandbox reach only the hosts its preset and binding allow.  It reads its configuration from the file given with \fB\-c\fR; \fB\-t\fR checks it and the presets and exits; \fB\-d\fR logs debug lines.  egressd.service runs it as the user egressd.'
    files='/etc/egressd/egressd.conf, /etc/egressd/policies/*.allow, /var/lib/egressd, /var/log/egressd/access.log, /run/egressd/admin.sock'
    also='egressctl(1), sandboxctl(1)'
    ;;
egressctl)
    what='check, explain and control egressd'
    text='egressctl checks a configuration and its presets, explains the verdict for a host under a preset or a sandbox binding, reads access logs, and asks the running egressd (over its admin socket) to reload or for its status and bindings.'
    files='/etc/egressd/egressd.conf, /run/egressd/admin.sock'
    also='egressd(8), sandboxctl(1)'
    ;;
sandboxctl)
    what='sandbox VMs on Proxmox VE behind egressd'
    text='sandboxctl creates, lists, extends and destroys throwaway Proxmox VE VMs for coding agents, each bound to an egressd policy; runs commands and moves files and git history through the guest agent; serves the same operations over MCP (\fBmcp\fR) and an operator console (\fBconsole\fR).  sandboxctl-reap.timer runs \fBreap\fR and \fBsync\fR every 5 minutes once enabled.'
    files='/etc/sandboxctl/sandboxctl.conf, /etc/sandboxctl/pve-token, /var/lib/sandboxctl, /usr/share/egressd/sandboxctl.conf.example'
    also='egressd(8), egressctl(1)'
    ;;
*)
    echo "mkman.sh: no page text for $name" >&2
    exit 1
    ;;
esac

# The usage: what -h prints (on either stream), less a line about the
# option itself; roff's escape character and control characters escaped.
usage=$("$prog" -h 2>&1 | grep -v -e 'invalid option' -e 'unknown option' || true)
case $usage in
usage:*) ;;
*) echo "mkman.sh: $prog -h printed no usage" >&2; exit 1 ;;
esac
upper=$(printf '%s' "$name" | tr '[:lower:]' '[:upper:]')
{
    printf '.TH %s %s "" "%s %s"\n' "$upper" "$section" "$name" "$version"
    printf '.SH NAME\n%s \\- %s\n' "$name" "$what"
    printf '.SH SYNOPSIS\n.nf\n'
    printf '%s\n' "$usage" | sed -e 's/\\/\\e/g' -e 's/-/\\-/g' -e "s/^[.']/\\\\\\&&/"
    printf '.fi\n.SH DESCRIPTION\n%s\n' "$text"
    printf '.SH FILES\n%s\n' "$files"
    printf '.SH SEE ALSO\n%s; the full documentation: /usr/share/doc/egressd/README.md\n' "$also"
} >"$out"
