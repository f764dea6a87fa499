/*
 * provider.c - the names of the three providers, as egressd's configuration
 * and logs spell them.
 */
#include "oauth_int.h"

const char *oauth_provider_name(enum oauth_provider p)
{
    switch (p) {
    case OAUTH_ANTHROPIC: return "anthropic";
    case OAUTH_OPENAI: return "openai";
    case OAUTH_GOOGLE: return "google";
    }
    return "unknown";
}
