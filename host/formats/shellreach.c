/* shellreach.c: finding, in a shell migration's text, what connects to a
 * cluster past the runner's gateway (see shellreach.h). Owns the list of
 * those constructs and how a line is read for them (word boundaries, a
 * trailing comment ignored); the policy (unpredictable under a dry run) is
 * the runner's. */
#include "formats/shellreach.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

/* Options that point kubectl or helm at another cluster or identity. */
static const char *const FLAGS[] = {"--kubeconfig", "--server", "--token", "--kube-apiserver",
                                    "--kube-token", "--kube-ca-file", NULL};

static int word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
}

/* needle in line[0..n) as a whole word (a flag: followed by '=', a blank or
 * the end; a variable: preceded by no word character). */
static const char *word_in(const char *line, size_t n, const char *needle)
{
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++) {
        if (memcmp(line + i, needle, k) != 0)
            continue;
        if (i > 0 && word_char(line[i - 1]))
            continue;
        if (i + k < n && word_char(line[i + k]))
            continue;
        return line + i;
    }
    return NULL;
}

static int has(const char *line, size_t n, const char *s)
{
    size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(line + i, s, k) == 0)
            return 1;
    return 0;
}

/* Why this line reaches another cluster, or NULL. */
static const char *line_reaches(const char *line, size_t n, char *buf, size_t blen)
{
    for (const char *const *f = FLAGS; *f; f++)
        if (word_in(line, n, *f)) {
            snprintf(buf, blen, "%s", *f);
            return buf;
        }
    const char *kc = word_in(line, n, "KUBECONFIG");
    if (kc && kc + 10 < line + n && kc[10] == '=') {
        snprintf(buf, blen, "KUBECONFIG=");
        return buf;
    }
    if ((word_in(line, n, "curl") || word_in(line, n, "wget")) &&
        (has(line, n, "/api/") || has(line, n, "/apis/"))) {
        snprintf(buf, blen, "%s at an API path", word_in(line, n, "curl") ? "curl" : "wget");
        return buf;
    }
    return NULL;
}

/* The line (1-based) of the first construct that reaches another cluster,
 * with one line in why naming it; 0 when there is none. Comment lines
 * (first non-blank character '#') are skipped. */
static int shellreach_find(const char *text, size_t len, char *why, size_t whylen)
{
    int lineno = 0;
    for (size_t i = 0; i < len;) {
        const char *line = text + i;
        const char *nl = memchr(line, '\n', len - i);
        size_t n = nl ? (size_t)(nl - line) : len - i;
        i += n + 1;
        lineno++;
        size_t b = 0;
        while (b < n && (line[b] == ' ' || line[b] == '\t'))
            b++;
        if (b < n && line[b] == '#')
            continue;
        char buf[64];
        const char *w = line_reaches(line, n, buf, sizeof buf);
        if (w) {
            if (why && whylen)
                snprintf(why, whylen, "line %d: %s: it connects to a cluster on its own, past the "
                         "runner's gateway, where a dry run cannot hold", lineno, w);
            return lineno;
        }
    }
    if (why && whylen)
        *why = '\0';
    return 0;
}

int shellreach_file(const char *path, char *why, size_t whylen)
{
    size_t len = 0;
    char *text = util_read_file(path, &len);
    if (!text) {
        if (why && whylen)
            snprintf(why, whylen, "%s could not be read, so a dry run cannot tell where it connects",
                     path);
        return -1;
    }
    int line = shellreach_find(text, len, why, whylen);
    free(text);
    return line;
}
