# A shell script's work: every generated text file of a folder piped through
# short-lived tools (tr, sort, uniq, wc, head, grep): 15 forks and 11 programs a file,
# each started under the allocator being measured (LD_PRELOAD is inherited).
# usage: sh pipeline.sh DIR     (prints a line per DIR/part-*.txt, then the totals)
set -eu
dir=$1
files=0
words=0
for f in "$dir"/part-*.txt; do
  n=$(wc -w <"$f")
  lines=$(wc -l <"$f")
  distinct=$(tr ' ' '\n' <"$f" | sort -u | wc -l)
  top=$(tr ' ' '\n' <"$f" | sort | uniq -c | sort -k1,1nr -k2,2 | head -n 1)
  long=$(grep -c -E '[a-z]{10}' "$f" || true)
  echo "${f##*/} lines $lines words $n distinct $distinct top $(echo $top) long $long"
  files=$((files + 1))
  words=$((words + n))
done
echo "files $files words $words"
