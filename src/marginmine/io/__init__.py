"""Files in and out, shared by every stage: strict readers of plain or gzip text (:mod:`.text`),
atomic writes, path-role checks and SHA-256 (:mod:`.safe`), resumable outputs: partial file, state,
fingerprint, atomic finish (:mod:`.resume`), the label sidecar (:mod:`.labels`), size labels
(:mod:`.sizes`), TSV, HTML and Markdown that web text cannot break (:mod:`.markup`), progress lines
(:mod:`.progress`)."""
