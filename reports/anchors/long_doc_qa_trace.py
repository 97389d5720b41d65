#!/usr/bin/env python3
"""Writes the long-document-QA workload of vLLM PR #10874 / #11533 as a kvtwin native trace.

The benchmark (benchmarks/benchmark_long_document_qa.py as of that PR) builds N documents of
about 20,010 tokens, each starting with its number so that no document is a prefix of another,
repeats the list twice, shuffles it with Python's `random` seeded 0, runs it once as a warm-up,
shuffles the same list again and times the second run (LLM.generate of every prompt at once,
10 output tokens each). Python's `random` is used here too, so the two orders are the
benchmark's own.

Rows: the warm-up pass arrives at t = 0, the timed pass at t = WINDOW_START_S; replay it with
workload.start_s = workload.warmup_s = WINDOW_START_S so that the summary covers the timed pass
only, with every cache as the warm-up left it.

usage: long_doc_qa_trace.py NUM_DOCUMENTS OUT.csv
"""
import random
import sys

DOCUMENT_TOKENS = 20011  # 20,010 words of the prompt, plus the BOS token
OUTPUT_TOKENS = 10
REPEAT_COUNT = 2
WINDOW_START_S = 100000


def main() -> None:
    n = int(sys.argv[1])
    random.seed(0)
    prompts = list(range(n)) * REPEAT_COUNT
    random.shuffle(prompts)
    warmup = list(prompts)
    random.shuffle(prompts)
    with open(sys.argv[2], "w") as f:
        f.write("arrival_s,prompt_tokens,output_tokens,block_size,block_ids\n")
        for at, order in ((0, warmup), (WINDOW_START_S, prompts)):
            for doc in order:
                # one chained id per document: equal ids, equal tokens
                f.write(f"{at},{DOCUMENT_TOKENS},{OUTPUT_TOKENS},{DOCUMENT_TOKENS},{doc + 1}\n")


if __name__ == "__main__":
    main()
