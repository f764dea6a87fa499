/*
 * geo.c - country and AS number of an address, from the GeoIP2 / GeoLite2
 * databases the caller opened (libmaxminddb reads them from memory: no I/O
 * happens here).
 */
#include <netinet/in.h>
#include <string.h>

#include <maxminddb.h>

#include "policy_int.h"

static bool lookup(MMDB_s *db, const uint8_t addr[16], MMDB_lookup_result_s *res)
{
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    struct sockaddr_in sin = {.sin_family = AF_INET};
    struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6};
    const struct sockaddr *sa;
    int mmdb_err;

    if (memcmp(addr, mapped, 12) == 0) {
        memcpy(&sin.sin_addr, addr + 12, 4);
        sa = (const struct sockaddr *)&sin;
    } else {
        memcpy(&sin6.sin6_addr, addr, 16);
        sa = (const struct sockaddr *)&sin6;
    }
    *res = MMDB_lookup_sockaddr(db, sa, &mmdb_err);
    return mmdb_err == MMDB_SUCCESS && res->found_entry;
}

void geo_lookup(const struct policy *p, const uint8_t addr[16], char cc[3], uint32_t *asn)
{
    MMDB_lookup_result_s res;
    MMDB_entry_data_s data;

    cc[0] = '\0';
    *asn = 0;
    if (p->geo_country != NULL && lookup(p->geo_country, addr, &res) &&
        MMDB_get_value(&res.entry, &data, "country", "iso_code", NULL) == MMDB_SUCCESS &&
        data.has_data && data.type == MMDB_DATA_TYPE_UTF8_STRING && data.data_size == 2) {
        memcpy(cc, data.utf8_string, 2);
        cc[2] = '\0';
    }
    if (p->geo_asn != NULL && lookup(p->geo_asn, addr, &res) &&
        MMDB_get_value(&res.entry, &data, "autonomous_system_number", NULL) == MMDB_SUCCESS &&
        data.has_data && data.type == MMDB_DATA_TYPE_UINT32)
        *asn = data.uint32;
}
