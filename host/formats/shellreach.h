/* shellreach.h: whether a shell migration's text connects to a cluster on
 * its own, past the runner's gateway: a kubeconfig, server or token of its
 * own on a kubectl or helm command line (--kubeconfig, --server,
 * --token, --kube-apiserver, --kube-token), a KUBECONFIG it sets itself, or
 * curl/wget at an API path. Such a script's writes to that other cluster
 * would not pass the door, so a dry run cannot hold there: the runner
 * reports it unpredictable and does not run it under --dry-run or preview.
 * Static, hence a heuristic: it cannot see a flag built at run time (eval,
 * a variable holding "--kubeconfig", a sourced file, another program
 * speaking to an apiserver); the shell child's network confinement
 * (docs/internals.md) is what holds then. Pure: no I/O. */
#ifndef COZY_SHELLREACH_H
#define COZY_SHELLREACH_H
#include <stddef.h>

/* The same for the file at path; a file that cannot be read counts as
 * reaching (why says so): a dry run never runs what it could not judge. */
int shellreach_file(const char *path, char *why, size_t whylen);
#endif
