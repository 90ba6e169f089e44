// Package timeline records the controller's timeline: one JSON line per
// evaluation (levels.Line) in daily files data_dir/timeline/YYYY-MM-DD.jsonl,
// named by UTC date, and reads a time range of them back for GET
// /v1/timeline. Recording never blocks the health loop: lines go through a
// bounded buffer to one writer goroutine, and a line that does not fit, or
// cannot be written, is dropped and counted. Old files are deleted by age
// and by total size; the total, the file being written included, stays
// within record.max_bytes at every moment, and recording stops before the
// disk is too short for the state file (Options.Reserve). Once today's file
// holds half the budget at a rate that would fill it before midnight UTC,
// the writer warns once, with the time, while a reload can still raise it.
//
// A Builder summarizes a range for the dashboard's History view (GET
// /v1/timeline?points=N) and the replay report: the published level as
// bands, each signal's minimum and maximum per bucket, the tables in force
// and every override, reload and restart as a mark. ReadSeries streams
// the files into one, never holding the lines.
//
// It is not the replay: internal/replay reads the files and runs the rules.
package timeline
