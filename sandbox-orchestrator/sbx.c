/* sbx.c - struct sbx: configuration plus Proxmox client, and argument helpers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress.h"
#include "sbx.h"

struct sbx *sbx_new(const char *config_path, char *err, size_t errlen)
{
    struct sbx *s = calloc(1, sizeof *s);

    if (!s)
        abort();
    if (sbx_config_load(&s->cfg, config_path, err, errlen) ||
        sbx_egress_check_token(&s->cfg, err, errlen) ||
        !(s->pve = sbx_pve_new(&s->cfg, err, errlen))) {
        sbx_free(s);
        return NULL;
    }
    return s;
}

void sbx_free(struct sbx *s)
{
    if (!s)
        return;
    sbx_pve_free(s->pve);
    sbx_config_free(&s->cfg);
    free(s);
}

struct sbx *sbx_sibling_new(struct sbx *s, char *err, size_t errlen)
{
    struct sbx *own = malloc(sizeof *own);

    if (!own)
        abort();
    *own = *s;
    memset(&own->progress, 0, sizeof own->progress);
    own->pve = sbx_pve_new(&s->cfg, err, errlen);
    if (!own->pve) {
        free(own);
        return NULL;
    }
    return own;
}

void sbx_sibling_free(struct sbx *own)
{
    if (!own)
        return;
    sbx_pve_free(own->pve);
    free(own);
}

const char *const *sbx_config_mcp_presets(const struct sbx *s)
{
    return (const char *const *)s->cfg.mcp_presets;
}

const char *const *sbx_config_size_names(struct sbx *s)
{
    for (int i = 0; i < s->cfg.nsizes && i < SBX_MAX_SIZES; i++)
        s->size_names[i] = s->cfg.sizes[i].name;
    s->size_names[s->cfg.nsizes < SBX_MAX_SIZES ? s->cfg.nsizes : SBX_MAX_SIZES] = NULL;
    return s->size_names;
}

const char *const *sbx_config_mcp_secrets(const struct sbx *s)
{
    return (const char *const *)s->cfg.mcp_secrets;
}

const char *sbx_config_mcp_token_file(const struct sbx *s)
{
    return s->cfg.mcp_token_file;
}

int sbx_config_mcp_repos(const struct sbx *s)
{
    return s->cfg.nmcp_repos;
}

int sbx_pve_major(struct sbx *s, char *err, size_t errlen)
{
    json_t *v = NULL;
    const char *ver;

    if (s->pve_major)
        return s->pve_major;
    if (sbx_pve_call(s->pve, "GET", "/version", NULL, &v, err, errlen))
        return 0;
    ver = json_string_value(json_object_get(v, "version"));
    s->pve_major = ver ? atoi(ver) : 0;
    if (!s->pve_major)
        snprintf(err, errlen, "GET /version: no version in the answer");
    json_decref(v);
    return s->pve_major;
}

int sbx_args_check(json_t *args, const char *const *allowed, char *err, size_t errlen)
{
    const char *key;
    json_t *v;

    if (args && !json_is_object(args)) {
        snprintf(err, errlen, "arguments must be a JSON object");
        return -1;
    }
    json_object_foreach(args, key, v)
    {
        int known = 0;
        for (size_t i = 0; allowed[i] && !known; i++)
            known = strcmp(allowed[i], key) == 0;
        if (!known) {
            snprintf(err, errlen, "unknown argument '%.64s'", key);
            return -1;
        }
    }
    return 0;
}

const char *sbx_args_string(json_t *args, const char *key, int required, char *err, size_t errlen)
{
    json_t *v = json_object_get(args, key);

    if (!v || json_is_null(v)) {
        if (required)
            snprintf(err, errlen, "missing argument '%s'", key);
        return NULL;
    }
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
        snprintf(err, errlen, "argument '%s' must be a string", key);
        return NULL;
    }
    return json_string_value(v);
}

void sbx_progress_set(struct sbx *s, sbx_progress_fn fn, void *arg)
{
    sbx_progress_listen(&s->progress, fn, arg);
}

void sbx_scope_owner(struct sbx *s, const char *owner)
{
    snprintf(s->owner_scope, sizeof s->owner_scope, "%s", owner ? owner : "");
}
