"""Document extraction: PDF, DOCX, PPTX, XLSX and HTML to markdown, in a worker process."""
