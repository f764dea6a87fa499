/* mcp_args.c - checks tool arguments against the tool's inputSchema.
 *
 * Only the JSON Schema 2020-12 keywords our tools use are understood: type,
 * properties, required, additionalProperties (false), enum, items,
 * minItems, maxItems, minLength, maxLength, minimum, maximum.  Other keywords
 * (description, pattern, ...) are advice to the assistant; the operation
 * checks the values again and has the last word.
 */
#include <stdio.h>
#include <string.h>

#include "mcp_server.h"

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a value";
}

static int type_matches(const char *type, const json_t *v)
{
    if (strcmp(type, "string") == 0)
        return json_is_string(v);
    if (strcmp(type, "integer") == 0)
        return json_is_integer(v);
    if (strcmp(type, "number") == 0)
        return json_is_number(v);
    if (strcmp(type, "boolean") == 0)
        return json_is_boolean(v);
    if (strcmp(type, "array") == 0)
        return json_is_array(v);
    if (strcmp(type, "object") == 0)
        return json_is_object(v);
    if (strcmp(type, "null") == 0)
        return json_is_null(v);
    return 0;
}

/* Code points in a UTF-8 string (jansson has checked the encoding). */
static size_t utf8_length(const char *s)
{
    size_t n = 0;

    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

static int check_value(const json_t *schema, const json_t *v, const char *path, char *err,
                       size_t errlen);

static int check_enum(const json_t *list, const json_t *v, const char *path, char *err,
                      size_t errlen)
{
    size_t i, off;
    const json_t *e;

    json_array_foreach(list, i, e) if (json_equal(e, v)) return 0;
    off = (size_t)snprintf(err, errlen, "%s: expected one of", path);
    json_array_foreach(list, i, e)
    {
        if (off >= errlen)
            break;
        off += (size_t)snprintf(err + off, errlen - off, "%s \"%s\"", i ? "," : "",
                                json_is_string(e) ? json_string_value(e) : "?");
    }
    return -1;
}

static int check_string(const json_t *schema, const json_t *v, const char *path, char *err,
                        size_t errlen)
{
    json_int_t min = json_integer_value(json_object_get(schema, "minLength"));
    const json_t *max = json_object_get(schema, "maxLength");
    size_t n = utf8_length(json_string_value(v));

    if ((json_int_t)n < min) {
        snprintf(err, errlen, "%s: expected at least %lld characters", path, (long long)min);
        return -1;
    }
    if (json_is_integer(max) && (json_int_t)n > json_integer_value(max)) {
        snprintf(err, errlen, "%s: expected at most %lld characters", path,
                 (long long)json_integer_value(max));
        return -1;
    }
    return 0;
}

static int check_number(const json_t *schema, const json_t *v, const char *path, char *err,
                        size_t errlen)
{
    const json_t *min = json_object_get(schema, "minimum");
    const json_t *max = json_object_get(schema, "maximum");
    double x = json_number_value(v);

    if (json_is_number(min) && x < json_number_value(min)) {
        snprintf(err, errlen, "%s: expected at least %g", path, json_number_value(min));
        return -1;
    }
    if (json_is_number(max) && x > json_number_value(max)) {
        snprintf(err, errlen, "%s: expected at most %g", path, json_number_value(max));
        return -1;
    }
    return 0;
}

static int check_array(const json_t *schema, const json_t *v, const char *path, char *err,
                       size_t errlen)
{
    const json_t *items = json_object_get(schema, "items");
    const json_t *max = json_object_get(schema, "maxItems");
    json_int_t min = json_integer_value(json_object_get(schema, "minItems"));
    char sub[256];
    size_t i;
    const json_t *e;

    if ((json_int_t)json_array_size(v) < min) {
        snprintf(err, errlen, "%s: expected at least %lld items", path, (long long)min);
        return -1;
    }
    if (json_is_integer(max) && (json_int_t)json_array_size(v) > json_integer_value(max)) {
        snprintf(err, errlen, "%s: expected at most %lld items", path,
                 (long long)json_integer_value(max));
        return -1;
    }
    if (!json_is_object(items))
        return 0;
    json_array_foreach(v, i, e)
    {
        snprintf(sub, sizeof sub, "%s[%zu]", path, i);
        if (check_value(items, e, sub, err, errlen) == -1)
            return -1;
    }
    return 0;
}

/* The names of an object schema's properties as "a, b, c". */
static void property_names(const json_t *props, char *buf, size_t len)
{
    const char *k;
    const json_t *p;
    size_t off = 0;

    buf[0] = '\0';
    json_object_foreach((json_t *)props, k, p)
    {
        if (off >= len)
            break;
        off += (size_t)snprintf(buf + off, len - off, "%s%s", off ? ", " : "", k);
    }
}

static int check_object(const json_t *schema, const json_t *v, const char *path, char *err,
                        size_t errlen)
{
    const json_t *props = json_object_get(schema, "properties");
    const json_t *req = json_object_get(schema, "required");
    const json_t *addl = json_object_get(schema, "additionalProperties");
    const char *k;
    const json_t *e;
    char sub[256], names[256];
    size_t i;

    json_array_foreach(req, i, e)
    {
        if (json_is_string(e) && !json_object_get(v, json_string_value(e))) {
            snprintf(err, errlen, "%s: \"%s\" is required", path, json_string_value(e));
            return -1;
        }
    }
    json_object_foreach((json_t *)v, k, e)
    {
        const json_t *ps = json_object_get(props, k);

        snprintf(sub, sizeof sub, "%s.%s", path, k);
        if (!ps && json_is_false(addl)) {
            property_names(props, names, sizeof names);
            snprintf(err, errlen, "%s: unknown argument \"%s\" (expected: %s)", path, k,
                     names[0] ? names : "no arguments");
            return -1;
        }
        if (ps && check_value(ps, e, sub, err, errlen) == -1)
            return -1;
    }
    return 0;
}

static int check_value(const json_t *schema, const json_t *v, const char *path, char *err,
                       size_t errlen)
{
    const char *type = json_string_value(json_object_get(schema, "type"));
    const json_t *list = json_object_get(schema, "enum");

    if (type && !type_matches(type, v)) {
        snprintf(err, errlen, "%s: expected %s %s, got %s", path,
                 strchr("aeiou", type[0]) ? "an" : "a", type, type_name(v));
        return -1;
    }
    if (json_is_array(list) && check_enum(list, v, path, err, errlen) == -1)
        return -1;
    if (json_is_string(v))
        return check_string(schema, v, path, err, errlen);
    if (json_is_number(v))
        return check_number(schema, v, path, err, errlen);
    if (json_is_array(v))
        return check_array(schema, v, path, err, errlen);
    if (json_is_object(v))
        return check_object(schema, v, path, err, errlen);
    return 0;
}

int sbx_mcp_args_check(const json_t *schema, const json_t *args, char *err, size_t errlen)
{
    return check_value(schema, args, "arguments", err, errlen);
}
