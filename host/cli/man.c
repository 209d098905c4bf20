/* man.c: the man pages, made from the command table and each command's
 * --help. Owns turning a help text into man(7) source (its "Usage:" line
 * the SYNOPSIS, each "Heading:" line a section, each "  --flag ARG  text"
 * line a tagged paragraph, the rest running text) and `cozy-migrate man`,
 * which writes cozy-migrate.1 (the commands, as the main help lists them)
 * and cozy-migrate-COMMAND.1 for every row of the table. Nothing here is
 * written by hand: a command or an option is on its page because the
 * table and the help text hold it (spec/release/man_spec.lua checks that
 * every option of a command's table is named on its page). */
#include "cli/cli.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/exitcodes.h"
#include "base/log.h"

const char cli_man_help[] =
    "Usage: cozy-migrate man --out DIR [options]\n"
    "\n"
    "Writes the manual: DIR/cozy-migrate.1 (every command, as the main help\n"
    "lists them) and DIR/cozy-migrate-COMMAND.1 for each command, in man(7)\n"
    "source made from the command table and each command's --help (`make man`\n"
    "runs it into build/man; `make install` puts the pages in share/man/man1).\n"
    "\n"
    "Options:\n"
    "  --out DIR           the directory to write the pages into (it must exist)\n"
    "  --list              print each command and the options of its table, one\n"
    "                      line each, instead of writing pages\n"
    "\n"
    "Exit codes: 0 written, 1 a page could not be written, 2 usage.\n";

static int set_list(struct cli *c, const char *flag, const char *arg)
{
    (void)flag, (void)arg;
    c->list = 1;
    return 0;
}
static const struct cli_option man_opt_list = {"list", no_argument, 0, 0, set_list};

const struct cli_option *const cli_man_options[] = {
    TOOL_OPTS, &cli_opt_out, &man_opt_list, NULL,
};

/* A command's --help as one string (a help_fn prints it: lint's rules come
 * from the linter's table), the cluster options' after it as print_help
 * shows them (the options it shares with others). NULL when out of memory. */
static char *help_text(const struct command *cmd)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    if (cmd->help_fn) {
        /* help_fn prints to stdout: point stdout at the stream's file for
         * the call. */
        fflush(stdout);
        FILE *tmp = tmpfile();
        int saved = tmp ? dup(STDOUT_FILENO) : -1;
        if (saved < 0 || dup2(fileno(tmp), STDOUT_FILENO) < 0) {
            if (saved >= 0)
                close(saved);
            if (tmp)
                fclose(tmp);
            fclose(f);
            free(text);
            return NULL;
        }
        cmd->help_fn();
        fflush(stdout);
        dup2(saved, STDOUT_FILENO);
        close(saved);
        rewind(tmp);
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, tmp)) > 0)
            fwrite(buf, 1, n, f);
        fclose(tmp);
    } else {
        cli_help_write(cmd->help, f);
    }
    const char *common = cli_common_help(cmd);
    if (common) {
        fputc('\n', f);
        cli_help_write(common, f);
    }
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* Text as roff reads it: a backslash doubled, a dash a minus (so a flag
 * can be searched and copied), a line's leading '.' or '\'' made text. */
static void roff_text(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (i == 0 && (s[i] == '.' || s[i] == '\''))
            fputs("\\&", f);
        if (s[i] == '\\')
            fputs("\\e", f);
        else if (s[i] == '-')
            fputs("\\-", f);
        else
            fputc(s[i], f);
    }
}

/* "Options:" or "Cluster options:": a heading line of a help text. */
static int is_heading(const char *line, size_t n)
{
    if (n < 2 || line[n - 1] != ':' || !isupper((unsigned char)line[0]))
        return 0;
    for (size_t i = 0; i + 1 < n; i++)
        if (!isalpha((unsigned char)line[i]) && line[i] != ' ')
            return 0;
    return 1;
}

/* The column an option's text starts at in a help text ("  --dir DIR   the
 * tree": 14): the most frequent among its option lines, so a tag as long as
 * the gap ("  --lease-duration DUR how long") still splits there. 0: none. */
static size_t text_column(const char *p)
{
    size_t count[128] = {0}, best = 0;
    while (*p) {
        size_t n = strcspn(p, "\n");
        if (n > 2 && p[0] == ' ' && p[1] == ' ' && p[2] == '-') {
            const char *gap = strstr(p + 2, "  ");
            if (gap && gap < p + n) {
                size_t at = (size_t)(gap - p) + strspn(gap, " ");
                if (at < 128 && ++count[at] > count[best])
                    best = at;
            }
        }
        p += n + (p[n] == '\n');
    }
    return best;
}

/* The body of a help text after its "Usage:" line, as man(7). */
static void roff_body(FILE *f, const char *p)
{
    int in_item = 0;
    size_t col = text_column(p);
    while (*p) {
        size_t n = strcspn(p, "\n");
        const char *line = p;
        p += n + (p[n] == '\n');
        if (n == 0) {
            fputs(".PP\n", f);
            in_item = 0;
            continue;
        }
        if (is_heading(line, n)) {
            fputs(".SH ", f);
            for (size_t i = 0; i + 1 < n; i++)
                fputc(toupper((unsigned char)line[i]), f);
            fputc('\n', f);
            in_item = 0;
            continue;
        }
        if (n > 2 && line[0] == ' ' && line[1] == ' ' && line[2] == '-') {
            /* "  --flag ARG   what it does": the tag up to the help's text
             * column, or up to two spaces */
            const char *tag = line + 2, *end = line + n;
            const char *gap = strstr(tag, "  ");
            if (gap && gap > end)
                gap = NULL;
            if ((!gap || gap > line + col) && col > 3 && col < n && line[col - 1] == ' ' &&
                line[col] != ' ')
                gap = line + col - 1;
            else if (!gap)
                gap = end;
            fputs(".TP\n.B ", f);
            roff_text(f, tag, (size_t)(gap - tag));
            fputc('\n', f);
            while (gap < end && *gap == ' ')
                gap++;
            if (gap < end) {
                roff_text(f, gap, (size_t)(end - gap));
                fputc('\n', f);
            }
            in_item = 1;
            continue;
        }
        const char *t = line;
        while (t < line + n && *t == ' ')
            t++;
        if (!in_item && t > line)
            fputs(".br\n", f); /* an indented line of its own (a list, an example) */
        roff_text(f, t, (size_t)(line + n - t));
        fputc('\n', f);
    }
}

static void upper(FILE *f, const char *s)
{
    for (; *s; s++)
        fputc(toupper((unsigned char)*s), f);
}

/* The summary of the main help on one line. */
static void summary_line(FILE *f, const char *s)
{
    for (const char *nl; (nl = strchr(s, '\n')); s = nl + 1) {
        roff_text(f, s, (size_t)(nl - s));
        fputc(' ', f);
    }
    roff_text(f, s, strlen(s));
}

static void command_page(FILE *f, const struct command *cmd, const char *help)
{
    fputs(".TH COZY\\-MIGRATE\\-", f);
    upper(f, cmd->name);
    fputs(" 1 \"\" \"cozy-migrate\" \"cozy-migrate manual\"\n.SH NAME\ncozy\\-migrate\\-", f);
    roff_text(f, cmd->name, strlen(cmd->name));
    fputs(" \\- ", f);
    summary_line(f, cmd->summary);
    fputs("\n.SH SYNOPSIS\n", f);
    const char *body = help;
    if (strncmp(help, "Usage: ", 7) == 0) {
        size_t n = strcspn(help + 7, "\n");
        fputs(".B ", f);
        roff_text(f, help + 7, n);
        fputc('\n', f);
        body = help + 7 + n + (help[7 + n] == '\n');
    } else {
        fputs(".B cozy\\-migrate ", f);
        roff_text(f, cmd->usage, strlen(cmd->usage));
        fputs(" [options]\n", f);
    }
    fputs(".SH DESCRIPTION\n", f);
    roff_body(f, body);
    fputs(".SH HELP\n\\fBcozy\\-migrate ", f);
    roff_text(f, cmd->name, strlen(cmd->name));
    fputs(" \\-\\-help\\fR prints this page's text.\n.SH SEE ALSO\n.BR cozy\\-migrate (1)\n", f);
}

static void main_page(FILE *f)
{
    fputs(".TH COZY\\-MIGRATE 1 \"\" \"cozy-migrate\" \"cozy-migrate manual\"\n"
          ".SH NAME\ncozy\\-migrate \\- the Cozystack migration engine\n"
          ".SH SYNOPSIS\n.B cozy\\-migrate\n.I command\n[options]\n"
          ".SH DESCRIPTION\nRuns a platform's migrations, each in a supervised child, and "
          "keeps the ledger of what ran. Each command's options are on its own page, and in "
          "\\fBcozy\\-migrate\\fR \\fIcommand\\fR \\fB\\-\\-help\\fR.\n.SH COMMANDS\n", f);
    for (const struct command *cmd = cli_commands; cmd->name; cmd++) {
        fputs(".TP\n.B ", f);
        roff_text(f, cmd->usage, strlen(cmd->usage));
        fputc('\n', f);
        summary_line(f, cmd->summary);
        fputs(" (\\fBcozy\\-migrate\\-", f);
        roff_text(f, cmd->name, strlen(cmd->name));
        fputs("\\fR(1))\n", f);
    }
    fputs(".SH SEE ALSO\n", f);
    for (const struct command *cmd = cli_commands; cmd->name; cmd++) {
        fputs(".BR cozy\\-migrate\\-", f);
        roff_text(f, cmd->name, strlen(cmd->name));
        fputs(cmd[1].name ? " (1),\n" : " (1)\n", f);
    }
}

/* Writes one page: 0, or EXIT_FAILED after saying which and why. */
static int write_page(const char *dir, const struct command *cmd)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/cozy-migrate%s%s.1", dir, cmd ? "-" : "", cmd ? cmd->name : "");
    char *help = NULL;
    if (cmd && !(help = help_text(cmd))) {
        log_fatal("man: %s: cannot make its help text", cmd->name);
        return EXIT_FAILED;
    }
    FILE *f = fopen(path, "w");
    if (!f) {
        log_fatal("man: %s: %s", path, strerror(errno));
        free(help);
        return EXIT_FAILED;
    }
    if (cmd)
        command_page(f, cmd, help);
    else
        main_page(f);
    free(help);
    if (ferror(f) | (fclose(f) != 0)) {
        log_fatal("man: %s: cannot write it", path);
        return EXIT_FAILED;
    }
    return EXIT_OK;
}

int cli_man(struct cli *c, int argc, char **argv, int first)
{
    if (cli_no_operands(c, argc, argv, first))
        return EXIT_USAGE;
    if (c->list) {
        for (const struct command *cmd = cli_commands; cmd->name; cmd++) {
            fputs(cmd->name, stdout);
            for (const struct cli_option *const *o = cmd->options; o && *o; o++)
                printf(" --%s", (*o)->name);
            fputc('\n', stdout);
        }
        return EXIT_OK;
    }
    if (!c->out) {
        log_usage(c->cmd, "--out DIR is required: the directory to write the pages into");
        return EXIT_USAGE;
    }
    int rc = write_page(c->out, NULL);
    for (const struct command *cmd = cli_commands; cmd->name && rc == EXIT_OK; cmd++)
        rc = write_page(c->out, cmd);
    return rc;
}
