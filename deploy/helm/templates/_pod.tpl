{{- /*
  The parts the hook Job, the --only Job, the background Jobs' template and
  the dispatcher's CronJob share, so their pods are one spec (deploy/*.yaml
  are rendered from these).
  Names start with "cozy-migrate." so they cannot clash with a platform
  chart's own templates when the snippet is copied into it.
*/ -}}

{{- /* Whether the engine's objects render at all: migrations.enabled, on
  unless it says false ("false", 0, "0", "no" and "off" too, as a Package
  CR's values may spell it), so a platform's own `migrations.enabled`
  keeps its meaning. "true" or "". */ -}}
{{- define "cozy-migrate.enabled" -}}
{{- $v := dig "enabled" true (.Values.migrations | default dict) -}}
{{- if not (has (lower (toString $v)) (list "false" "0" "no" "off" "<nil>" "")) }}true{{ end -}}
{{- end -}}

{{- /* The env shell migrations read, for every pod that runs migrations
  (the hook, the --only Job, the background Jobs): migrations.extraEnv
  (name and value), then each named hatch of migrations.hatches (ENV: key)
  as "1" or "0" from migrations.<key> (1, true, yes, in any spelling, is
  "1"; anything else, absent included, "0": a hatch is taken only when
  said), then PASS_ENV naming them all, which is how the runner lets a
  variable reach a shell migration. A name the engine sets itself is
  refused. A JSON list of {name, value}. */ -}}
{{- define "cozy-migrate.script-env" -}}
{{- $m := .Values.migrations -}}
{{- $out := list -}}
{{- $names := list -}}
{{- $engine := list "KUBECONFIG" "KUBERNETES_SERVICE_HOST" "KUBERNETES_SERVICE_PORT" "KUBERNETES_SERVICE_PORT_HTTPS" "HTTP_PROXY" "HTTPS_PROXY" "NO_PROXY" "ALL_PROXY" "http_proxy" "https_proxy" "no_proxy" "all_proxy" "NAMESPACE" "MIGRATION_SLUG" "CURRENT_VERSION" "TARGET_VERSION" "KUBECACHEDIR" "ONLY" "SKIP" "SKIP_REASON" "DRY_RUN" "PASS_ENV" "MIGRATIONS_IMAGE" "MIGRATIONS_INDEX" "MIGRATIONS_JOB_TEMPLATE" "PATH" "HOME" -}}
{{- range $m.extraEnv | default list -}}
{{- $out = append $out (dict "name" .name "value" (toString (.value | default ""))) -}}
{{- $names = append $names .name -}}
{{- end -}}
{{- $h := $m.hatches | default dict -}}
{{- range $name := keys $h | sortAlpha -}}
{{- $raw := dig (get $h $name) false $m -}}
{{- $on := has (lower (toString $raw)) (list "1" "true" "yes") -}}
{{- $out = append $out (dict "name" $name "value" ($on | ternary "1" "0")) -}}
{{- $names = append $names $name -}}
{{- end -}}
{{- range $names -}}
{{- if not (regexMatch "^[A-Za-z_][A-Za-z0-9_]*$" .) -}}
{{- fail (printf "migrations.extraEnv/hatches: %q is not a variable name" .) -}}
{{- end -}}
{{- if or (has . $engine) (hasPrefix "LD_" .) -}}
{{- fail (printf "migrations.extraEnv/hatches: %s is the engine's to set, not a value for the migrations" .) -}}
{{- end -}}
{{- end -}}
{{- if ne (len $names) (len (uniq $names)) -}}
{{- fail (printf "migrations.extraEnv/hatches: a name is given twice (%s)" (join ", " $names)) -}}
{{- end -}}
{{- if $names -}}
{{- $out = prepend $out (dict "name" "PASS_ENV" "value" (join "," $names)) -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{- /* The migrations index the release ships (cozy-migrate index wrote it
  from the image's tree): its pre-apply and revoked slugs feed the render
  gate, its background slugs the dispatcher (through the index ConfigMap). */ -}}
{{- define "cozy-migrate.index-file" -}}
{{- $f := .Files.Get "files/cozy-migrate-index.json" -}}
{{- if not $f -}}
{{- fail "files/cozy-migrate-index.json is missing: the chart ships the migrations index (cozy-migrate index --image REF > files/cozy-migrate-index.json; README: Deploying the hook)" -}}
{{- end -}}
{{- $f -}}
{{- end -}}

{{- define "cozy-migrate.index" -}}
{{- $ix := include "cozy-migrate.index-file" . | fromJson -}}
{{- if or (hasKey $ix "Error") (not (hasKey $ix "pre-apply")) (not (hasKey $ix "revoked")) (not (hasKey $ix "background")) -}}
{{- fail "files/cozy-migrate-index.json is not a migrations index (regenerate it with cozy-migrate index)" -}}
{{- end -}}
{{- if ne (int (get $ix "version")) 2 -}}
{{- fail "files/cozy-migrate-index.json is not a version 2 migrations index (regenerate it with this release's cozy-migrate index)" -}}
{{- end -}}
{{- toJson $ix -}}
{{- end -}}

{{- /* The index as the hook gets it (env MIGRATIONS_INDEX): the chart's,
  its image the one the release runs, so the runner compares with its own
  tree and image exactly what the render gate decided on. */ -}}
{{- define "cozy-migrate.index-env" -}}
{{- $ix := include "cozy-migrate.index" . | fromJson -}}
{{- $_ := set $ix "image" (include "cozy-migrate.image" .) -}}
{{- toJson $ix -}}
{{- end -}}

{{- /* The image reference: migrations.image, else the index's; refused
  without a tag or digest, or with the tag latest (a ledger record must say
  which image ran), and when the two name different images (a release runs
  one; a mirror of it keeps its digest). */ -}}
{{- define "cozy-migrate.image" -}}
{{- $ix := include "cozy-migrate.index" . | fromJson -}}
{{- $given := .Values.migrations.image | default "" -}}
{{- $pinned := $ix.image | default "" -}}
{{- $ref := required "migrations.image is required (repo:tag or repo@sha256:...), or an index that names the image" ($given | default $pinned) -}}
{{- $name := regexReplaceAll "@sha256:[0-9a-f]{64}$" $ref "" -}}
{{- $last := last (splitList "/" $name) -}}
{{- $tag := "" -}}
{{- if contains ":" $last }}{{ $tag = last (splitList ":" $last) }}{{ end -}}
{{- if contains "@" $name -}}
{{- fail (printf "migrations.image %q: a digest is @sha256: and 64 hex digits" $ref) -}}
{{- end -}}
{{- if and (eq $name $ref) (not $tag) -}}
{{- fail (printf "migrations.image %q: give a tag or a digest (the ledger records which image ran)" $ref) -}}
{{- end -}}
{{- if eq $tag "latest" -}}
{{- fail (printf "migrations.image %q: the tag latest names no fixed image; give a version tag or a digest" $ref) -}}
{{- end -}}
{{- if and $given $pinned (ne $given $pinned) -}}
{{- $d1 := regexFind "@sha256:[0-9a-f]{64}$" $given -}}
{{- $d2 := regexFind "@sha256:[0-9a-f]{64}$" $pinned -}}
{{- if or (not $d1) (ne $d1 $d2) -}}
{{- fail (printf "migrations.image %q is not the image the index names, %q: a release runs one image (leave migrations.image empty, or regenerate the index with cozy-migrate index --image)" $given $pinned) -}}
{{- end -}}
{{- end -}}
{{- $ref -}}
{{- end -}}

{{- /* The render gate: whether the pre-apply hook has anything to do. Yes
  when the ledger is absent (a fresh install: the hook seeds it), when
  lookup sees nothing (helm template, a client dry run: fail open), when a
  shipped pre-apply slug or a revoked slug has no m.<slug> key, or when a
  slug of migrations.skip is not recorded skipped yet. "true" or "". */ -}}
{{- define "cozy-migrate.hook-needed" -}}
{{- $ix := include "cozy-migrate.index" . | fromJson -}}
{{- $ledger := lookup "v1" "ConfigMap" .Release.Namespace "cozystack-version" -}}
{{- $need := false -}}
{{- if not $ledger -}}
{{- $need = true -}}
{{- else -}}
{{- $data := $ledger.data | default dict -}}
{{- range index $ix "pre-apply" -}}
{{- if not (hasKey $data (printf "m.%s" .slug)) }}{{ $need = true }}{{ end -}}
{{- end -}}
{{- range index $ix "revoked" -}}
{{- if not (hasKey $data (printf "m.%s" .)) }}{{ $need = true }}{{ end -}}
{{- end -}}
{{- range splitList "," (include "cozy-migrate.skip" $) -}}
{{- if . -}}
{{- $rec := get $data (printf "m.%s" .) | default "{}" | fromJson -}}
{{- if ne (get $rec "state" | default "") "skipped" }}{{ $need = true }}{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if $need }}true{{ end -}}
{{- end -}}

{{- /* How long the upgrade (the hook, the --only Job) waits for the runner
  lock: lockTimeoutSeconds, and never less than the longest background
  timeout of the index plus a minute (its grace, its record, the next
  boundary), so a background migration in flight when the upgrade starts
  hands the lock over inside the wait (README: The upgrade first on the
  lock). */ -}}
{{- define "cozy-migrate.upgrade-lock-wait" -}}
{{- $ix := include "cozy-migrate.index" . | fromJson -}}
{{- $wait := int .Values.migrations.lockTimeoutSeconds -}}
{{- range index $ix "background" -}}
{{- $t := add (int (ceil (get . "timeout_s"))) 60 -}}
{{- if gt (int $t) (int $wait) }}{{ $wait = $t }}{{ end -}}
{{- end -}}
{{- $wait -}}
{{- end -}}

{{- /* The migrations' total timeout, from the index's own timeouts (each
  header's timeout=, 10m by default): for the hook, the sum over the
  pre-apply slugs without a record in the ledger, less the legacy slugs
  whose number is below the ledger's `version` (the runner seeds those
  `legacy`: a platform's first upgrade onto the engine runs only the
  legacy scripts above its version) (every pre-apply slug when
  lookup sees no ledger: a fresh install, helm template); for the --only
  Job, its one slug's. Call with (dict "root" $ "only" SLUG-or-""). */ -}}
{{- define "cozy-migrate.migrations-timeout" -}}
{{- $ix := include "cozy-migrate.index" .root | fromJson -}}
{{- $only := .only -}}
{{- $sum := 0 -}}
{{- if $only -}}
{{- range concat (index $ix "pre-apply") (index $ix "background") -}}
{{- if eq .slug $only }}{{ $sum = int (ceil .timeout_s) }}{{ end -}}
{{- end -}}
{{- if not $sum -}}
{{- fail (printf "migrations.only %q is not a slug the index ships (files/cozy-migrate-index.json)" $only) -}}
{{- end -}}
{{- else -}}
{{- $ledger := lookup "v1" "ConfigMap" .root.Release.Namespace "cozystack-version" -}}
{{- $data := dict -}}
{{- if $ledger }}{{ $data = $ledger.data | default dict }}{{ end -}}
{{- $version := 0 -}}
{{- $v := get $data "version" | default "" | toString -}}
{{- if regexMatch "^[0-9]{1,5}$" $v }}{{ $version = int $v }}{{ end -}}
{{- range index $ix "pre-apply" -}}
{{- $seeded := and .legacy (lt (int .legacy) $version) -}}
{{- if not (or (hasKey $data (printf "m.%s" .slug)) $seeded) }}{{ $sum = add $sum (int (ceil .timeout_s)) }}{{ end -}}
{{- end -}}
{{- end -}}
{{- $sum -}}
{{- end -}}

{{- /* The Job's deadline: activeDeadlineSeconds if set (above the lock
  wait plus the migrations' timeouts, or refused), else that sum + 60 s.
  Call with (dict "root" $ "only" SLUG-or-""). */ -}}
{{- define "cozy-migrate.deadline" -}}
{{- $m := .root.Values.migrations -}}
{{- $min := add (int (include "cozy-migrate.upgrade-lock-wait" .root)) (int (include "cozy-migrate.migrations-timeout" .)) -}}
{{- if $m.activeDeadlineSeconds -}}
{{- if le (int $m.activeDeadlineSeconds) (int $min) -}}
{{- fail (printf "migrations.activeDeadlineSeconds %v must be above the lock wait + the migrations' timeouts from the index (%d): the Job would be killed inside a migration's own timeout" $m.activeDeadlineSeconds $min) -}}
{{- end -}}
{{- int $m.activeDeadlineSeconds -}}
{{- else -}}
{{- add $min 60 -}}
{{- end -}}
{{- end -}}

{{- /* SKIP: the slugs of migrations.skip (a list, or one comma-separated
  string from a values file), comma-joined as the runner reads them. */ -}}
{{- define "cozy-migrate.skip" -}}
{{- $s := .Values.migrations.skip | default list -}}
{{- if kindIs "string" $s }}{{ $s = splitList "," $s }}{{ end -}}
{{- $out := list -}}
{{- range $s }}{{ $v := trim (toString .) }}{{ if $v }}{{ $out = append $out $v }}{{ end }}{{ end -}}
{{- if and $out (not (trim .Values.migrations.skipReason)) -}}
{{- fail "migrations.skip needs migrations.skipReason (why it is safe to skip, recorded in the ledger)" -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{- /* The pod template's spec. Call with (dict "root" $ "sa" NAME "args" LIST "env" LIST
  [ "command" LIST ]). */ -}}
{{- define "cozy-migrate.pod" -}}
{{- $m := .root.Values.migrations -}}
serviceAccountName: {{ .sa }}
restartPolicy: Never
# Pod Security "restricted" (README: Deploying the hook): non-root,
# RuntimeDefault seccomp, no privilege escalation, every capability dropped.
securityContext: {runAsNonRoot: true, runAsUser: 65534, runAsGroup: 65534, seccompProfile: {type: RuntimeDefault}}
containers:
- name: migrate
  image: {{ include "cozy-migrate.image" .root | quote }}
  imagePullPolicy: {{ $m.imagePullPolicy }}
  {{- with .command }}
  command: {{ toJson . }}
  {{- end }}
  args: {{ toJson .args }}
  env:
  - name: NAMESPACE
    valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
  - name: MIGRATIONS_IMAGE
    value: {{ include "cozy-migrate.image" .root | quote }}
  {{- with .env }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- with include "cozy-migrate.script-env" .root | fromJsonArray }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  # The reason of a failure where `kubectl describe pod` and Helm's error
  # show it: the runner writes its fatal line and each failed migration to
  # the termination message; the log's last lines when it could not.
  terminationMessagePolicy: FallbackToLogsOnError
  securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: ["ALL"]}}
  volumeMounts:
  - {name: tmp, mountPath: /tmp}
  {{- with $m.resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
volumes:
- {name: tmp, emptyDir: {}}
{{- end -}}

{{- /* The template of the background Jobs the dispatcher creates, part of
  the release: rendered into the dispatcher's own CronJob (env
  MIGRATIONS_JOB_TEMPLATE), never into a ConfigMap. The hook's pod as the
  jobServiceAccount, the lock wait and a margin as activeDeadlineSeconds
  (the dispatcher adds each slug's timeout), no retries of its own (the
  dispatcher retries, with a backoff, counted in the ledger). The
  dispatcher checks it, sets its own image, ONLY, restricted Pod Security
  and the podFailurePolicy itself. */ -}}
{{- define "cozy-migrate.background-job" -}}
{{- $m := .Values.migrations -}}
apiVersion: batch/v1
kind: Job
spec:
  backoffLimit: 0
  activeDeadlineSeconds: {{ add (int $m.lockTimeoutSeconds) 60 }}
  ttlSecondsAfterFinished: {{ $m.ttlSecondsAfterFinished }}
  template:
    spec:
      {{- $args := list "--tier" "background" "--lock-timeout" (printf "%ds" (int $m.lockTimeoutSeconds)) "--log-format" $m.logFormat }}
      {{- include "cozy-migrate.pod" (dict "root" . "sa" $m.jobServiceAccount "args" $args "env" list) | nindent 6 }}
{{- end -}}
