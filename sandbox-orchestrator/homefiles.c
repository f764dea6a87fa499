/* homefiles.c - the agent CLIs' files in the guest user's home (homefiles.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guest.h"
#include "homefiles.h"

#define STAGE_DIR "/run/sandboxctl-home" /* root's: the texts before they move in */

/* Where each provider's CLI keeps its login, relative to the home. */
static const char *login_path(const char *provider)
{
    if (strcmp(provider, "anthropic") == 0)
        return ".claude/.credentials.json";
    if (strcmp(provider, "openai") == 0)
        return ".codex/auth.json";
    return ".gemini/oauth_creds.json";
}

static char *dup_text(const char *t)
{
    char *d = strdup(t);
    if (d == NULL)
        abort();
    return d;
}

/* Whether f[0..n) already has a file for dest. */
static bool has_dest(const struct sbx_home_file *f, int n, const char *dest)
{
    for (int i = 0; i < n; i++)
        if (strcmp(f[i].dest, dest) == 0)
            return true;
    return false;
}

/* Add one file unless dest has one already. */
static void add(struct sbx_home_file *f, int *n, const char *dest, char *text, bool keep)
{
    if (*n >= SBX_HOME_FILES_MAX || has_dest(f, *n, dest)) {
        free(text);
        return;
    }
    f[(*n)++] = (struct sbx_home_file){dest, text, keep};
}

int sbx_home_files_of(const struct sbx_creds *cr, struct sbx_home_file *f, int *n)
{
    static const char gemini_settings[] =
        "{\n  \"security\": {\n    \"auth\": {\n      \"selectedType\": \"oauth-personal\"\n"
        "    }\n  }\n}\n";
    char buf[256];

    *n = 0;
    for (int i = 0; i < cr->n; i++)
        if (cr->login_file[i] != NULL) {
            add(f, n, login_path(cr->provider[i]), dup_text(cr->login_file[i]), false);
            if (strcmp(cr->provider[i], "google") == 0)
                add(f, n, ".gemini/settings.json", dup_text(gemini_settings), true);
        }
    for (int i = 0; i < cr->n; i++)
        if (cr->login_file[i] == NULL && strcmp(cr->var[i], "OPENAI_API_KEY") == 0) {
            /* (the placeholder's shape is checked: no quoting needed) */
            if (snprintf(buf, sizeof buf,
                         "{\n  \"auth_mode\": \"apikey\",\n  \"OPENAI_API_KEY\": \"%s\"\n}\n",
                         cr->placeholder[i]) >= (int)sizeof buf)
                return -1;
            add(f, n, ".codex/auth.json", dup_text(buf), false);
        }
    return 0;
}

void sbx_home_files_free(struct sbx_home_file *f, int n)
{
    for (int i = 0; i < n; i++)
        free(f[i].text);
}

/* As root in the guest: each staged file moved into the user's home, in
 * directories the user makes (so they are the user's), the file the
 * user's and 0600; args: USER, then STAGED DEST KEEP triples. */
static const char move_script[] =
    "set -e; u=$1; shift\n"
    "home=$(getent passwd \"$u\" | cut -d: -f6)\n"
    "[ -n \"$home\" ] || { echo \"the sandbox has no user '$u' (guest-user), whose home the "
    "agents' credentials files go into\" >&2; exit 3; }\n"
    "g=$(id -g \"$u\")\n"
    "while [ $# -ge 3 ]; do\n"
    "  src=$1 dest=$home/$2 keep=$3; shift 3\n"
    "  runuser -u \"$u\" -- mkdir -p -- \"$(dirname -- \"$dest\")\"\n"
    "  if [ \"$keep\" = 1 ] && [ -e \"$dest\" ]; then rm -f -- \"$src\"; continue; fi\n"
    "  chown \"$u:$g\" -- \"$src\" && chmod 0600 -- \"$src\" && mv -f -- \"$src\" \"$dest\"\n"
    "done\n"
    "rmdir -- " STAGE_DIR " 2>/dev/null || true";

/* Stage f[0..n) in the guest and move them in; 0 or -1 with err. */
static int install(struct sbx *s, const char *node, int vmid, const struct sbx_home_file *f, int n,
                   char *err, size_t errlen)
{
    static const char mkstage[] = "mkdir -p -m 0700 -- \"$1\"";
    const char *stage_args[] = {STAGE_DIR, NULL};
    const char *args[1 + 3 * SBX_HOME_FILES_MAX + 1];
    char staged[SBX_HOME_FILES_MAX][64], why[1024];
    int k = 0;

    if (sbx_guest_script(s, node, vmid, "home files: staging directory", mkstage, stage_args,
                         s->cfg.exec_timeout_ms, NULL, err, errlen))
        return -1;
    args[k++] = s->cfg.guest_user;
    for (int i = 0; i < n; i++) {
        snprintf(staged[i], sizeof staged[i], STAGE_DIR "/%d", i);
        if (sbx_guest_write(s, node, vmid, staged[i], (const unsigned char *)f[i].text,
                            strlen(f[i].text), why, sizeof why)) {
            snprintf(err, errlen, "~%s/%s: %s", s->cfg.guest_user, f[i].dest, why);
            return -1;
        }
        args[k++] = staged[i];
        args[k++] = f[i].dest;
        args[k++] = f[i].keep_existing ? "1" : "0";
    }
    args[k] = NULL;
    return sbx_guest_script(s, node, vmid, "home files (the agents' credentials files)",
                            move_script, args, s->cfg.exec_timeout_ms, NULL, err, errlen);
}

int sbx_home_files_install(struct sbx *s, const char *node, int vmid, const struct sbx_creds *cr,
                           char *err, size_t errlen)
{
    struct sbx_home_file f[SBX_HOME_FILES_MAX];
    int n = 0, rc;

    if (sbx_home_files_of(cr, f, &n)) {
        snprintf(err, errlen, "home files: a file for the guest cannot be made");
        return -1;
    }
    rc = n > 0 ? install(s, node, vmid, f, n, err, errlen) : 0;
    sbx_home_files_free(f, n);
    return rc;
}
