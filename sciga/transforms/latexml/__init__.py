"""Our own LaTeXML conversion: an e-print to an HTML page, and pages made from e-prints for
`--html-from latexml|auto`."""
