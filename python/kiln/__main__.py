"""python3 -m kiln train|eval [options]: the `kiln train` / `kiln eval`
jobs run through the Python package (kiln.nn.train, kiln.nn.evaluate),
with the same options as the command."""

import argparse
import sys

from . import nn, KilnError, __version__


def _train_parser(sub):
    p = sub.add_parser("train", help="train a model on Fashion-MNIST (as `kiln train`)")
    a = p.add_argument
    a("--model", default="mlp", choices=["mlp", "cnn", "lstm"])
    a("--mode", default="eager", choices=["eager", "jit", "lazy"])
    a("--epochs", type=int, default=2)
    a("--batch", type=int, default=64)
    a("--lr", type=float, default=0.0, help="default sgd 0.05, adam 0.001")
    a("--optimizer", default="sgd", choices=["sgd", "adam", "adamw"])
    a("--momentum", type=float, default=0.9)
    a("--schedule", default="cosine", choices=["none", "step", "cosine"])
    a("--seed", type=int, default=0)
    a("--data", default=None, metavar="DIR")
    a("--save", default=None, metavar="FILE")
    a("--resume", default=None, metavar="FILE")
    a("--plot", default=None, metavar="FILE.svg")
    a("--metrics", default=None, metavar="FILE.json")
    a("--steps", type=int, default=0)
    a("--sync", default="step", choices=["step", "phases"])
    a("--limit-train", type=int, default=0)
    a("--limit-test", type=int, default=0)
    return p


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m kiln")
    ap.add_argument("--version", action="version", version="kiln " + __version__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    _train_parser(sub)
    e = sub.add_parser("eval", help="evaluate a checkpoint on the test set")
    e.add_argument("checkpoint")
    e.add_argument("--data", default=None)
    e.add_argument("--limit", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "train":
            nn.train(model=args.model, mode=args.mode, epochs=args.epochs, batch=args.batch,
                     lr=args.lr, optimizer=args.optimizer, momentum=args.momentum,
                     schedule=args.schedule, seed=args.seed, data=args.data, save=args.save,
                     resume=args.resume, plot=args.plot, metrics=args.metrics, steps=args.steps,
                     sync=args.sync, limit_train=args.limit_train, limit_test=args.limit_test,
                     progress=sys.stderr.isatty())
        else:
            loss, acc = nn.evaluate(args.checkpoint, args.data, args.limit)
            print("test_loss=%.4f" % loss)
            print("test_accuracy=%.4f" % acc)
    except KilnError as err:
        print("kiln: %s" % err, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
