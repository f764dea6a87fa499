/*
 * policy_load.c - read the preset files and GeoIP databases for policy/.
 */
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "policy_load.h"

/* A preset file larger than this is surely not hand-written. */
#define PRESET_MAX_BYTES (64u << 20)

int px_geo_open(struct px_geo *g, const struct px_config *c, char *err, size_t errlen)
{
    int rc;

    memset(g, 0, sizeof(*g));
    if (c->geoip_country[0] != '\0') {
        rc = MMDB_open(c->geoip_country, MMDB_MODE_MMAP, &g->country);
        if (rc != MMDB_SUCCESS) {
            snprintf(err, errlen, "%s: geoip-country: %s%s%s", c->geoip_country, MMDB_strerror(rc),
                     rc == MMDB_IO_ERROR ? ": " : "", rc == MMDB_IO_ERROR ? strerror(errno) : "");
            return -1;
        }
        g->have_country = true;
    }
    if (c->geoip_asn[0] != '\0') {
        rc = MMDB_open(c->geoip_asn, MMDB_MODE_MMAP, &g->asn);
        if (rc != MMDB_SUCCESS) {
            snprintf(err, errlen, "%s: geoip-asn: %s%s%s", c->geoip_asn, MMDB_strerror(rc),
                     rc == MMDB_IO_ERROR ? ": " : "", rc == MMDB_IO_ERROR ? strerror(errno) : "");
            px_geo_close(g);
            return -1;
        }
        g->have_asn = true;
    }
    return 0;
}

void px_geo_close(struct px_geo *g)
{
    if (g->have_country)
        MMDB_close(&g->country);
    if (g->have_asn)
        MMDB_close(&g->asn);
    g->have_country = g->have_asn = false;
}

/* Read a whole file; NULL with the reason in diag. */
static char *read_file(const char *path, size_t *len, struct policy_diag *diag)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    char *buf;

    if (f == NULL || fstat(fileno(f), &st) == -1) {
        int e = errno;
        if (f != NULL)
            fclose(f);
        policy_diag_add(diag, "%s: cannot read: %s", path, strerror(e));
        return NULL;
    }
    if (st.st_size > PRESET_MAX_BYTES) {
        fclose(f);
        policy_diag_add(diag, "%s: larger than %u MiB: not a policy file", path,
                        PRESET_MAX_BYTES >> 20);
        return NULL;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (buf == NULL)
        abort();
    *len = fread(buf, 1, (size_t)st.st_size, f);
    if (ferror(f)) {
        policy_diag_add(diag, "%s: read error: %s", path, strerror(errno));
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

static bool preset_name_ok(const char *name, size_t len)
{
    return len > 0 &&
           strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                        "0123456789-_.") >= len &&
           name[0] != '.';
}

/* Add every NAME.allow of the directory; false if it cannot be read. */
static bool add_dir(struct policy_builder *b, const char *dir, struct policy_diag *diag)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[4096];

    if (d == NULL) {
        policy_diag_add(diag, "%s: policy-dir: %s", dir, strerror(errno));
        return false;
    }
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n <= 6 || strcmp(e->d_name + n - 6, ".allow") != 0)
            continue;
        n -= 6;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (!preset_name_ok(e->d_name, n)) {
            policy_diag_add(diag, "%s: a preset name is letters, digits, '-', '_' and '.'", path);
            continue;
        }
        size_t len = 0;
        char *text = read_file(path, &len, diag);
        if (text == NULL)
            continue;
        char name[256];
        snprintf(name, sizeof(name), "%.*s", (int)n, e->d_name);
        policy_builder_add_preset(b, name, path, text, len);
        free(text);
    }
    closedir(d);
    return true;
}

bool px_ifaddr_to16(const struct sockaddr *sa, uint8_t a16[16])
{
    memset(a16, 0, 16);
    if (sa->sa_family == AF_INET) {
        a16[10] = a16[11] = 0xff;
        memcpy(a16 + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return true;
    }
    if (sa->sa_family == AF_INET6 && ((const struct sockaddr_in6 *)sa)->sin6_scope_id == 0) {
        memcpy(a16, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return true;
    }
    return false;
}

/* Deny every address of this host's interfaces, up or down: a service on
 * the appliance must not be reachable through it by one of its own public
 * addresses, which no range of the config names.  Read on every load, so
 * an address added since is denied from the next reload on.  Failing to
 * read them is an error of the load: the wall is not built without them. */
static void deny_own_addrs(struct policy_builder *b, struct policy_diag *diag)
{
    struct ifaddrs *list;
    uint8_t a16[16];

    if (getifaddrs(&list) == -1) {
        policy_diag_add(diag, "getifaddrs: cannot list this host's own addresses to deny them: %s",
                        strerror(errno));
        return;
    }
    for (const struct ifaddrs *i = list; i != NULL; i = i->ifa_next)
        if (i->ifa_addr != NULL && px_ifaddr_to16(i->ifa_addr, a16))
            policy_builder_deny_addr(b, a16);
    freeifaddrs(list);
}

struct policy *px_policy_load(const struct px_config *c, struct px_geo *g, struct policy_diag *diag)
{
    struct policy_builder *b = policy_builder_new();
    size_t errors = diag->n;

    add_dir(b, c->policy_dir, diag);
    for (size_t i = 0; i < c->n_deny_ranges; i++)
        policy_builder_deny_range(b, c->deny_ranges[i].spec, c->deny_ranges[i].where);
    deny_own_addrs(b, diag);
    for (size_t i = 0; i < c->n_allow_ranges; i++)
        policy_builder_allow_range(b, c->allow_ranges[i].spec, c->allow_ranges[i].where);
    policy_builder_geo(b, g->have_country ? &g->country : NULL, g->have_asn ? &g->asn : NULL);
    struct policy *p = policy_builder_finish(b, diag);
    if (p != NULL && policy_preset_rules(p, c->default_policy) < 0)
        policy_diag_add(diag, "%s: default-policy '%s' names no preset (no %s/%s.allow)", c->file,
                        c->default_policy, c->policy_dir, c->default_policy);
    if (diag->n > errors) {
        policy_unref(p);
        return NULL;
    }
    return p;
}
