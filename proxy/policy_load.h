/*
 * policy_load.h - the I/O side of policy/: read policy-dir's NAME.allow
 * files and the GeoIP databases named in egressd.conf, and build a
 * snapshot.  Shared by egressd (start and reload) and egressctl.
 */
#ifndef PX_POLICY_LOAD_H
#define PX_POLICY_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <maxminddb.h>

#include "config.h"
#include "policy.h"

/* The GeoIP databases a snapshot reads; they must stay open for as long as
 * any snapshot built with them lives. */
struct px_geo {
    MMDB_s country, asn;
    bool have_country, have_asn;
};

/* Open the databases the config names.  Returns 0, or -1 with the reason. */
int px_geo_open(struct px_geo *g, const struct px_config *c, char *err, size_t errlen);
void px_geo_close(struct px_geo *g);

/* Build a snapshot from c->policy_dir, c's ranges and g.  Every address of
 * this host's interfaces (getifaddrs(3), IPv4 and IPv6, up or down; not
 * link-local ones with a zone, which fe80::/10 covers) is denied as well, as
 * its own /32 or /128, whatever the deny-range lines say; allow-range
 * lifts them like any denied range.  They are read anew on every call, so
 * a reload picks up an address added since.  Also checks that
 * default-policy names a preset.  Returns the snapshot (one reference), or
 * NULL with every error in `diag` (a failing getifaddrs is one). */
struct policy *px_policy_load(const struct px_config *c, struct px_geo *g,
                              struct policy_diag *diag);

/* The 16-byte form (IPv4 as ::ffff:a.b.c.d) of an interface address, as
 * px_policy_load denies it; false for other families, and for an IPv6
 * address with a zone: the snapshot's form has none, and such an address
 * is link-local, in fe80::/10 of the default list already.  (addrwatch.c
 * lists the same addresses the same way.) */
bool px_ifaddr_to16(const struct sockaddr *sa, uint8_t a16[16]);

#endif
