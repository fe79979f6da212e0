"""Files in and out, shared by every stage: strict readers of plain or gzip text (:mod:`.text`),
atomic writes, path-role checks and SHA-256 (:mod:`.safe`), progress lines (:mod:`.progress`)."""
