/* tally.c - see tally.h. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "tally.h"

void sbx_tally_add(json_t *counts, const char *group, const char *key)
{
    json_t *keys = json_object_get(counts, group);

    if (!keys)
        json_object_set_new(counts, group, keys = json_object());
    json_object_set_new(keys, key,
                        json_integer(json_integer_value(json_object_get(keys, key)) + 1));
}

/* Sort by count, most first. */
static int most_first(const void *a, const void *b)
{
    json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "count"));
    json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "count"));

    return x < y ? 1 : x > y ? -1 : 0;
}

json_t *sbx_tally_top(json_t *counts, size_t k)
{
    json_t *out = json_object(), *keys, *n;
    const char *group, *key;

    json_object_foreach(counts, group, keys)
    {
        size_t len = json_object_size(keys), i = 0;
        json_t **v = calloc(len ? len : 1, sizeof *v), *list = json_array();
        if (!v)
            abort();
        json_object_foreach(keys, key, n) v[i++] =
            json_pack("{s:s, s:I}", "host", key, "count", json_integer_value(n));
        qsort(v, len, sizeof *v, most_first);
        for (i = 0; i < len; i++)
            if (i < k)
                json_array_append_new(list, v[i]);
            else
                json_decref(v[i]);
        free(v);
        json_object_set_new(out, group, list);
    }
    return out;
}

bool sbx_tally_host_port(json_t *line, char *buf, size_t len)
{
    const char *host = json_string_value(json_object_get(line, "host"));
    json_int_t port = json_integer_value(json_object_get(line, "port"));

    if (!host)
        return false;
    if (port > 0)
        snprintf(buf, len, "%.253s:%lld", host, (long long)port);
    else
        snprintf(buf, len, "%.253s", host);
    return true;
}
