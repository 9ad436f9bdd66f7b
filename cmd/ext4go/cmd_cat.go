package main

import "io"

func init() {
	register(&command{name: "cat", usage: "[--force] IMAGE PATH...", summary: "write files of the image to standard output", run: runCat})
}

func runCat(e *env, args []string) error {
	fsys, o, err := openRead(e, "cat", nil, args, 2, -1)
	if err != nil {
		return err
	}
	defer fsys.Close()
	return eachOperand(e, "cat", o.args, func(p string) error {
		f, err := fsys.Open(imagePath(p))
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(e.stdout, f)
		return err
	})
}
