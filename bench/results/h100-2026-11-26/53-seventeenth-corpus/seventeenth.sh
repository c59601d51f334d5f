# Recorded and compared with: (the same commands, now one script)
bash bench/record_traces/corpus_call.sh seventeenth
