/* bindings.c - each egressd's binding of a listed sandbox, compared with
 * the sandbox's description (bindings.h). */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "bindings.h"

/* The binding in bindings whose id is vmid, or NULL. */
static json_t *binding_of(json_t *bindings, json_int_t vmid)
{
    char id[24];
    json_t *b;
    size_t i;

    snprintf(id, sizeof id, "%lld", (long long)vmid);
    json_array_foreach(bindings, i, b)
    {
        const char *bid = json_string_value(json_object_get(b, "id"));
        if (bid && strcmp(bid, id) == 0)
            return b;
    }
    return NULL;
}

/* Whether the string members key of a and b are both there and equal. */
static bool same(json_t *a, json_t *b, const char *key)
{
    const char *x = json_string_value(json_object_get(a, key));
    const char *y = json_string_value(json_object_get(b, key));

    return x && y && strcmp(x, y) == 0;
}

/* The entry of sandbox sb for one egressd's bindings. */
static json_t *entry(json_t *sb, const char *target, json_t *bindings)
{
    json_t *b = binding_of(bindings, json_integer_value(json_object_get(sb, "vmid")));

    if (!b)
        return json_pack("{s:s, s:b, s:b}", "egressd", target, "bound", 0, "in_step", 0);
    bool in_step = !json_object_get(sb, "problem") && same(sb, b, "policy") &&
                   same(sb, b, "expires") && same(sb, b, "owner");
    return json_pack("{s:s, s:b, s:b, s:O?, s:O?}", "egressd", target, "bound", 1, "in_step",
                     in_step, "policy", json_object_get(b, "policy"), "expires",
                     json_object_get(b, "expires"));
}

void sbx_bindings_note(json_t *sandboxes, const char *target, json_t *bindings, const char *why)
{
    json_t *sb;
    size_t i;

    json_array_foreach(sandboxes, i, sb)
    {
        json_t *list = json_object_get(sb, "egressd");
        if (!json_is_array(list)) {
            list = json_array();
            json_object_set_new(sb, "egressd", list);
        }
        if (json_is_array(bindings))
            json_array_append_new(list, entry(sb, target, bindings));
        else
            json_array_append_new(list, json_pack("{s:s, s:s}", "egressd", target, "error",
                                                  why && *why ? why : "no answer"));
    }
}
