{{- /*
  The parts the hook Job, the --only Job and the background Job share, so
  their pods are one spec (deploy/*.yaml are rendered from these).
  Names start with "cozy-migrate." so they cannot clash with a platform
  chart's own templates when the snippet is copied into it.
*/ -}}

{{- /* The image reference, as given: refused without a tag or digest, or
  with the tag latest (a ledger record must say which image ran). */ -}}
{{- define "cozy-migrate.image" -}}
{{- $ref := required "migrations.image is required (repo:tag or repo@sha256:...)" .Values.migrations.image -}}
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
{{- $ref -}}
{{- end -}}

{{- /* The Job's deadline: activeDeadlineSeconds if set (above the lock
  wait plus the migrations' timeouts, or refused), else that sum + 60 s. */ -}}
{{- define "cozy-migrate.deadline" -}}
{{- $m := .Values.migrations -}}
{{- $min := add (int $m.lockTimeoutSeconds) (int $m.migrationsTimeoutSeconds) -}}
{{- if $m.activeDeadlineSeconds -}}
{{- if le (int $m.activeDeadlineSeconds) (int $min) -}}
{{- fail (printf "migrations.activeDeadlineSeconds %v must be above lockTimeoutSeconds + migrationsTimeoutSeconds (%d): the Job would be killed inside a migration's own timeout" $m.activeDeadlineSeconds $min) -}}
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

{{- /* The pod template's spec. Call with (dict "root" $ "sa" NAME "args" LIST "env" LIST). */ -}}
{{- define "cozy-migrate.pod" -}}
{{- $m := .root.Values.migrations -}}
serviceAccountName: {{ .sa }}
restartPolicy: Never
securityContext: {runAsNonRoot: true, runAsUser: 65534, runAsGroup: 65534}
containers:
- name: migrate
  image: {{ include "cozy-migrate.image" .root | quote }}
  imagePullPolicy: {{ $m.imagePullPolicy }}
  args: {{ toJson .args }}
  env:
  - name: NAMESPACE
    valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
  - name: MIGRATIONS_IMAGE
    value: {{ include "cozy-migrate.image" .root | quote }}
  {{- with .env }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- with $m.extraEnv }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  # The reason of a failure where `kubectl describe pod` and `kubectl get
  # job -o yaml` show it: the log's last lines, unless the runner wrote a
  # termination message itself.
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
