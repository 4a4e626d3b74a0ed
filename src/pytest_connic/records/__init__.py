"""What runs leave behind: run and case records, their serialisation, and the trace shape."""
